"""EXPERIMENT (not part of make bench): run a benchmark against the patched scratch copy.

    .venv/bin/python benchmarks/proto_alias.py paths --no-throughput --out /tmp/x
    .venv/bin/python benchmarks/proto_alias.py throughput --systems mysql-state,floor --rounds 3

``mysql_state`` is made to name ``mysql_state_proto`` (``proto-issue21.patch`` applied to a copy
in ``$PROTO_DIR``, built by proto_compare.build) in this process and, because this file is the
main module that ``spawn`` re-imports, in every worker process too.
"""
import harness  # noqa: F401

import importlib
import os
import pkgutil
import sys

import proto_compare

proto_compare.build()
sys.path.append(proto_compare.PROTO_DIR)
import mysql_state_proto  # noqa: E402

for info in pkgutil.iter_modules(mysql_state_proto.__path__):
    if info.name == "__main__":
        continue
    try:
        importlib.import_module(f"mysql_state_proto.{info.name}")
    except ImportError:
        pass  # an extra that is not installed
for name in [m for m in sys.modules if m == "mysql_state_proto" or m.startswith("mysql_state_proto.")]:
    sys.modules["mysql_state" + name[len("mysql_state_proto"):]] = sys.modules[name]

assert not any(m == "mysql_state" or m.startswith("mysql_state.") for m in sys.modules
               if sys.modules[m].__name__.startswith("mysql_state") and not sys.modules[m].__name__.startswith(
                   "mysql_state_proto")), "the real mysql_state was imported before the alias"

if __name__ == "__main__":
    target = importlib.import_module(sys.argv[1])
    print(f"running {sys.argv[1]} against {os.path.dirname(mysql_state_proto.__file__)}", flush=True)
    sys.exit(target.main(sys.argv[2:]))
