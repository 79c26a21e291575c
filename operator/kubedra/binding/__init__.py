"""Binding conditions (KEP-5007) of network-attached devices: the attach step and the
conditions it sets on a claim's ``status.devices``."""
