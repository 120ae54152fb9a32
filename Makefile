# Two commands on a fresh clone: `make demo` and `make test`. Both create .venv, install the
# project, and make sure a MySQL-compatible server can be started (MYSQL_URL, Docker, or a
# local mariadbd/mysqld, installing Debian's mariadb-server when run as root).
PYTHON ?= python3
comma  := ,
VENV   ?= .venv
PY      = $(VENV)/bin/python
EXTRAS ?= test,agentscope,encryption,metrics,langgraph

.PHONY: test demo demo-openai demo-adk demo-langgraph bench server-bin cluster-bin cluster venv clean

$(VENV)/.installed-$(subst $(comma),-,$(EXTRAS)): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $@

venv: $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))

server-bin:
	@if [ -n "$$MYSQL_URL" ]; then echo "using MYSQL_URL"; \
	elif command -v mariadbd >/dev/null 2>&1 || command -v mysqld >/dev/null 2>&1 || \
	     [ -x /usr/sbin/mariadbd ] || [ -x /usr/sbin/mysqld ]; then :; \
	elif docker info >/dev/null 2>&1; then echo "using Docker (testcontainers MySQL 8)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's mariadb-server (no server binary found)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >/dev/null; \
	else \
	    echo "No MySQL-compatible server found. Either set MYSQL_URL=mysql://user:pw@host:port/," >&2; \
	    echo "or install one: sudo apt-get install -y mariadb-server (Debian/Ubuntu)," >&2; \
	    echo "brew install mariadb (macOS), or start a Docker engine." >&2; exit 1; \
	fi

# Galera (galera-4) and rsync for tests/test_cluster.py: installed when root with apt and
# missing; never fails (without them the cluster tests skip, saying why).
cluster-bin:
	@if { [ -e /usr/lib/galera/libgalera_smm.so ] || [ -e /usr/lib/libgalera_smm.so ] || \
	      [ -e /usr/lib64/galera-4/libgalera_smm.so ]; } && command -v rsync >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing galera-4 and rsync (for the cluster tests)"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq galera-4 rsync >/dev/null; } || \
	    echo "could not install galera-4 rsync: the cluster tests will be skipped" >&2; \
	else \
	    echo "galera-4/rsync missing (apt-get install galera-4 rsync): the cluster tests will be skipped" >&2; \
	fi

# The tests run in JOBS worker processes (pytest-xdist), each with a server of its own (statement
# counts stay each test's own). Given MYSQL_URL, one server is shared: then one process (JOBS=0).
JOBS ?= $(if $(MYSQL_URL),0,2)

test: venv server-bin cluster-bin
	$(PY) tests/isolated.py
	$(PY) -m pytest -n $(JOBS) $(PYTEST_ARGS)

demo: venv server-bin
	$(PY) benchmarks/demo.py

# A throwaway Galera cluster of NODES nodes on loopback, its URLs printed, until Ctrl-C.
NODES ?= 3
cluster: venv server-bin cluster-bin
	$(PY) -m mysql_state.cluster galera $(NODES)

# Each framework in a virtualenv of its own (ADK and AgentScope 2.x pin different OpenTelemetry).
.venv-openai-agents/.made: setup.cfg pyproject.toml
	$(PYTHON) -m venv .venv-openai-agents
	.venv-openai-agents/bin/python -m pip install -q -e '.[openai-agents,test]'
	touch $@

.venv-adk/.made: setup.cfg pyproject.toml
	$(PYTHON) -m venv .venv-adk
	.venv-adk/bin/python -m pip install -q -e '.[adk,test]'
	touch $@

demo-openai: .venv-openai-agents/.made server-bin
	.venv-openai-agents/bin/python examples/openai_agents_restart.py

demo-adk: .venv-adk/.made server-bin
	.venv-adk/bin/python examples/adk_restart.py

demo-langgraph: venv server-bin
	$(PY) examples/langgraph_demo.py

bench:
	$(MAKE) EXTRAS=test,agentscope,encryption,langgraph,bench venv server-bin
	$(PY) benchmarks/run.py $(BENCH_ARGS)
	$(PY) benchmarks/catalog_bench.py
	$(PY) benchmarks/langgraph_bench.py $(LANGGRAPH_ARGS)

# AgentScope Java's real store beside this one on one table (docs/java.md): needs a checkout
# of agentscope-java, e.g. make java-interop AGENTSCOPE_JAVA=../agentscope-java. Not in make test.
java-interop: venv server-bin
	tools/java_interop/build.sh $(AGENTSCOPE_JAVA)
	$(PY) tools/java_interop/interop.py

clean:
	rm -rf $(VENV) .venv-agentscope1 .venv-openai-agents .venv-adk build *.egg-info .pytest_cache
