# kiln: the two set-up commands the README promises.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
JOBS ?= 2

.PHONY: demo test venv test-deps bench wheel-smoke clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

venv: $(PY)
	$(PY) -m pip install -q -e .

demo: venv
	$(PY) -m kiln.demo

# torch==2.13.0 resolves to the local CPU wheel; torchvision has no CPU build, so the CUDA build is
# installed without its dependencies (it then works on the CPU with torch's CPU wheel).
test-deps: venv
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q --no-deps torchvision==0.28.0
	$(PY) -m pip install -q -e '.[test]'

# The suite includes tests/cli/test_wheel.py: it builds the kiln-compiler wheel (python -m build), installs it in
# a fresh virtualenv and compiles and runs a small kernel and model with it (`make wheel-smoke` runs it alone).
test: test-deps
	$(PY) -m pytest -n $(JOBS) $(PYTEST_ARGS)

wheel-smoke: test-deps
	$(PY) tests/cli/wheel_smoke.py

bench: test-deps
	$(PY) -m benchmarks.run

clean:
	rm -rf $(VENV) build dist *.egg-info
