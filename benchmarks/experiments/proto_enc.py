"""EXPERIMENT (not part of make bench): the encrypted read with base64 decoded by the server.

    .venv/bin/python benchmarks/experiments/proto_enc.py

Plain rows read by a bare SELECT + orjson.loads, against sealed rows opened as the store does
today (text rows, base64 decoded in Python) and sealed rows whose base64 the server decodes
(FROM_BASE64 in the SELECT: binary rows, a quarter fewer bytes on the wire), N = 10 000.
"""
import os, sys  # noqa: E401

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/: harness
import harness  # noqa: E402
import orjson, pymysql, data
from mysql_state import Keyring, MysqlAgentStateStore
from mysql_state.crypto import PREFIX, RowCipher, NONCE_BYTES

url, kw = harness.server()
DB = "msbench_enc"
ring = Keyring({"k1": os.urandom(32)}, current="k1")
plain_s = MysqlAgentStateStore.from_url(url, database_name=DB, create_if_not_exist=True)
enc_s = MysqlAgentStateStore.from_url(url, database_name=DB, create_if_not_exist=True, encryption=ring)
n = 10000
base = data.Conversation(n).base
plain_s.save_list("u", "p", "m", base)
enc_s.save_list("u", "e", "m", base)
T = f"`{DB}`.`agentscope_sessions`"
con = pymysql.connect(charset="utf8mb4", autocommit=True, **kw)
cipher = RowCipher(ring, "agentscope_sessions")
head = PREFIX + "k1:"
aead = ring.aead("k1")
prefix = b"agentscope_sessions\0u:e\0m\0"

def plain():
    with con.cursor() as cur:
        cur.execute(f"SELECT state_data FROM {T} WHERE session_id='u:p' AND state_key='m' ORDER BY item_index")
        return [orjson.loads(r[0]) for r in cur.fetchall()]

def today():
    with con.cursor() as cur:
        cur.execute(f"SELECT state_data FROM {T} WHERE session_id='u:e' AND state_key='m' ORDER BY item_index")
        rows = cur.fetchall()
    op = cipher.opener("u:e", "m")
    return [orjson.loads(op(i, r[0])) for i, r in enumerate(rows)]

SERVER = (f"SELECT IF(LEFT(state_data, {len(head)}) = %s, FROM_BASE64(SUBSTRING(state_data, {len(head) + 1})), NULL)"
          f" FROM {T} WHERE session_id='u:e' AND state_key='m' ORDER BY item_index")
def server_b64():
    with con.cursor() as cur:
        cur.execute(SERVER, (head,))
        rows = cur.fetchall()
    dec = aead.decrypt
    out = []
    for i, (raw,) in enumerate(rows):
        out.append(orjson.loads(dec(raw[:NONCE_BYTES], raw[NONCE_BYTES:], prefix + b"%d" % i)))
    return out

assert plain() == today() == server_b64() == base
ops = {"plain: bare SELECT + loads": plain, "sealed, opened as today": today,
       "sealed, base64 decoded by the server": server_b64, "store.get_list plain": lambda: plain_s.get_list("u", "p", "m"),
       "store.get_list encrypted": lambda: enc_s.get_list("u", "e", "m")}
med = harness.interleaved(ops, 12)
for k, v in med.items():
    print(f"{k}: {v / 1000:.1f} ms ({v / med['plain: bare SELECT + loads']:.2f}x bare plain)")
print(f"store: encrypted / plain {med['store.get_list encrypted'] / med['store.get_list plain']:.2f}x;",
      f"server base64 / bare plain {med['sealed, base64 decoded by the server'] / med['plain: bare SELECT + loads']:.2f}x;",
      harness.loadavg_text())
with con.cursor() as cur:
    cur.execute(f"DROP DATABASE {DB}")
