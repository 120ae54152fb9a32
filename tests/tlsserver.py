"""A throwaway TLS-enabled server for the TLS tests: certificates made with the ``openssl``
CLI (a test CA, a server certificate naming ``IP:127.0.0.1`` and ``DNS:localhost``, a client
certificate, and an unrelated second CA), and users that require SSL or X509."""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass

import pymysql

from mysql_state.server import LocalServer

TLS_PASSWORD = "tls-Pw-7d1e9c"
X509_PASSWORD = "x509-Pw-4b2a8f"
DATABASE = "tls_test"
#: A second loopback address the server also listens on, which the certificate does not name.
UNNAMED_HOST = "127.0.0.2"


def _openssl(*args: str, cwd: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(cwd: str, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=mysql-state {name}",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=cwd)


def _issue(cwd: str, ca: str, name: str, cn: str, ext: str) -> None:
    with open(os.path.join(cwd, f"{name}.ext"), "w") as f:
        f.write(ext)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", cwd=cwd)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext", cwd=cwd)


@dataclass
class Certs:
    """Paths of the PEM files."""

    dir: str

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    @property
    def ca(self) -> str:
        return self.path("ca.pem")

    @property
    def other_ca(self) -> str:
        return self.path("other-ca.pem")

    @property
    def client_cert(self) -> str:
        return self.path("client.pem")

    @property
    def client_key(self) -> str:
        return self.path("client.key")


def make_certs() -> Certs:
    """A CA with a server and a client certificate, and an unrelated CA, in a temp folder."""
    d = tempfile.mkdtemp(prefix="mysql-state-tls-")
    _ca(d, "ca")
    _ca(d, "other-ca")
    _issue(d, "ca", "server", "mysql-state-server",
           "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
           "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _issue(d, "ca", "client", "x509", "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    return Certs(d)


class TlsServer:
    """A LocalServer with TLS on, listening on 127.0.0.1 and :data:`UNNAMED_HOST`."""

    def __init__(self) -> None:
        self.certs = make_certs()
        c = self.certs
        self.server = LocalServer(f"--ssl-ca={c.ca}", f"--ssl-cert={c.path('server.pem')}",
                                  f"--ssl-key={c.path('server.key')}", f"--bind-address=127.0.0.1,{UNNAMED_HOST}")
        self.port = self.server.port
        con = pymysql.connect(host="127.0.0.1", port=self.port, user="root", autocommit=True)
        with con.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{DATABASE}`")
            for user, pw, require in (("tls", TLS_PASSWORD, "SSL"), ("x509", X509_PASSWORD, "X509")):
                cur.execute(f"CREATE USER '{user}'@'%%' IDENTIFIED BY %s REQUIRE {require}", (pw,))
                cur.execute(f"GRANT ALL ON `{DATABASE}`.* TO '{user}'@'%'")
        con.close()

    def url(self, user: str = "tls", password: str = TLS_PASSWORD, host: str = "127.0.0.1", query: str = "") -> str:
        q = f"?{query}" if query else ""
        return f"mysql://{user}:{password}@{host}:{self.port}/{DATABASE}{q}"

    def stop(self) -> None:
        self.server.stop()
        subprocess.run(["rm", "-rf", self.certs.dir], check=False)
