# The README's two commands: `make fuzz` and `make test`. Both set up .venv first
# (created once, reinstalled only when the packaging or C sources change).
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.kvwindow-installed
EXTRAS ?= dev,hf,ort,mlx,ct2
DEPS   := pyproject.toml setup.py $(wildcard impl/_*_build.py csrc/*.c csrc/*.h)

.PHONY: fuzz test setup clean

setup: $(STAMP)

$(STAMP): $(DEPS)
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	@touch $(STAMP)

fuzz: $(STAMP)
	$(VENV)/bin/kvwindow fuzz --time 60

test: $(STAMP)
	$(PY) -m pytest

clean:
	rm -rf build *.egg-info csrc/build impl/_*.so
