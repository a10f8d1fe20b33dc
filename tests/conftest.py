"""Suite-wide pytest configuration: TVM's test plugin (markers, target parametrization)."""
pytest_plugins = ["kiln.testing.plugin"]
