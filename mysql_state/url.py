"""Connection URLs: parsing (one host or a list), TLS with the MySQL client's rules, redaction.

``mysql://user:password@host:port[,host2:port2,...]/database?ssl-mode=VERIFY_CA&ssl-ca=/ca.pem``

TLS follows ``mysql --ssl-mode`` rather than pymysql's own defaults:

* no option: ``PREFERRED`` (TLS when the server offers it, else clear text, nothing verified;
  a Unix socket connection stays clear text, as the MySQL client's does);
* ``ssl-ca`` without a mode: ``VERIFY_CA``;
* ``REQUIRED``: encrypted, the certificate is not verified;
* ``VERIFY_CA``: encrypted, the certificate must chain to ``ssl-ca``, which it needs (the MySQL
  client refuses the mode without one; for the system's CAs, name their bundle);
* ``VERIFY_IDENTITY``: as ``VERIFY_CA``, and the certificate must name the host connected to;
* ``REQUIRED`` and ``VERIFY_*`` refuse, before any credential is sent, a server without TLS;
* ``ssl-ca`` with a mode below ``VERIFY_CA`` (``DISABLED`` included) is a warning: nothing is
  verified with it;
* a private key protected by a pass phrase is refused (nothing could type it in).

Secrets: no message raised here contains the password, and no exception raised here chains
another whose message could (errors are raised outside ``except`` blocks). :func:`redact`
shows a URL with ``***`` in place of the password.
"""

from __future__ import annotations

import configparser
import os
import re
import select
import ssl
import warnings
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import parse_qs, unquote, urlsplit

import pymysql
from pymysql.constants import CLIENT
from pymysql.optionfile import Parser as OptionFileParser

from .errors import SSL_CONNECTION_ERROR as CR_SSL_CONNECTION_ERROR, MysqlStateWarning, caller_stacklevel, tls_failure

__all__ = [
    "SSL_MODES",
    "DEFAULT_PORT",
    "TlsOptions",
    "ParsedUrl",
    "parse",
    "parse_url",
    "parse_hosts",
    "tls_options",
    "ssl_context",
    "connect_args",
    "connect",
    "redact",
    "scrub",
]

DEFAULT_PORT = 3306
DISABLED, PREFERRED, REQUIRED, VERIFY_CA, VERIFY_IDENTITY = (
    "DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")
#: The MySQL client's ``--ssl-mode`` values, weakest first.
SSL_MODES = (DISABLED, PREFERRED, REQUIRED, VERIFY_CA, VERIFY_IDENTITY)
#: Modes that refuse a connection that is not encrypted.
ENCRYPTED_MODES = frozenset({REQUIRED, VERIFY_CA, VERIFY_IDENTITY})
#: The TLS options, as keywords (the URL also accepts them with a dash: ``ssl-mode``).
TLS_KEYS = ("ssl_mode", "ssl_ca", "ssl_cert", "ssl_key")
#: pymysql's own TLS keywords: refused, so the two sets of rules never mix.
_PYMYSQL_TLS_KEYS = ("ssl", "ssl_disabled", "ssl_verify_cert", "ssl_verify_identity", "ssl_capath",
                     "ssl_key_password")
_TIMEOUTS = ("connect_timeout", "read_timeout", "write_timeout")
#: pymysql keywords the store sets itself, or that change what rows read back as: refused (the
#: database is ``database_name=`` or the URL's; the others would break its reads, its
#: transactions or its one-packet writes).
_OWN_KEYS = {"database": "give database_name= or put it in the URL", "db": "give database_name= or put it in the URL",
             "charset": "the store always uses utf8mb4", "use_unicode": "the store reads text as str",
             "autocommit": "the store sets it per pool", "cursorclass": "the store reads rows as tuples",
             "conv": "the store reads rows with pymysql's own conversions",
             "client_flag": "the store sets the flags its one-packet writes need",
             "defer_connect": "the store opens its connections itself"}


# ---- redaction ---------------------------------------------------------------------------------


def redact(url: str) -> str:
    """``url`` with ``***`` in place of the password (whatever of it could be one).

    Errs on the side of hiding: everything between the first ``:`` after ``scheme://`` and the
    last ``@`` is replaced, so a password with an unencoded ``/`` or ``@`` is hidden too; the
    values of query parameters that are not settings are ``***``; and a URL with an ``@`` after
    a ``?`` or ``#`` (a secret in a query value, or an unencoded ``?``/``#`` in a password) is
    hidden whole after ``scheme://``. A text with no ``scheme://`` at all is not shown: it is no
    URL, and may be a secret given in the wrong place (a password variable where the URL goes).

    >>> redact("mysql://app:s3cr%40t@db:3306/agents")
    'mysql://app:***@db:3306/agents'
    >>> redact("hunter2XYZ")
    '(not shown: no scheme://, it may be a secret)'
    """
    if not isinstance(url, str):
        return "<not a string>"
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "(not shown: no scheme://, it may be a secret)"
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=-1)
    if cut >= 0 and "@" in rest[cut:]:
        # An '@' after a '?' or '#': a query value holding one (its '@' is not the end of the
        # password), or a password with an unencoded '?' or '#'. Which, is not known: all hidden.
        return f"{scheme}{sep}*** (not shown: it may hold a password)"
    at = rest.rfind("@")
    if at >= 0:
        user, colon, _ = rest[:at].partition(":")
        if colon:
            rest = f"{user}:***{rest[at:]}"
    return f"{scheme}{sep}{_redact_query(rest)}"


#: Query parameters whose values are settings, shown as they are; any other's value (a
#: ``password=`` given there, a secret pasted by mistake) is shown as ``***``.
_SHOWN_PARAMETERS = frozenset({"unix_socket", "connect_timeout", "read_timeout", "write_timeout",
                               "ssl_mode", "ssl_ca", "ssl_cert", "ssl_key"})


def _redact_query(rest: str) -> str:
    """The part of a URL after ``://`` with the values of unknown query parameters, and any
    fragment, as ``***``.

    >>> _redact_query("db/x?ssl-mode=REQUIRED&password=s3cret#frag")
    'db/x?ssl-mode=REQUIRED&password=***#***'
    """
    rest, hash_, _ = rest.partition("#")
    head, q, query = rest.partition("?")
    if q:
        pairs = []
        for pair in query.split("&"):
            name, eq, _ = pair.partition("=")
            shown = name.replace("-", "_").lower() in _SHOWN_PARAMETERS
            pairs.append(pair if shown or not eq else f"{name}=***")
        head += "?" + "&".join(pairs)
    return head + ("#***" if hash_ else "")


#: The credentials of any URL in a text (``scheme://user:password@``): what :func:`scrub` masks.
#: Up to the LAST ``@`` of the URL: a password with an unencoded ``@`` (and ``/``) is hidden whole.
_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/@:'\"]*:)[^\s]*@")
#: A password at least this long is masked wherever it appears in a text; a shorter one only
#: where it stands alone (not inside a word: a one-letter password must not garble every word).
_MASK_ANYWHERE = 8


def scrub(text: str, url: Optional[str] = None) -> str:
    """``text`` with the password of every URL in it (``scheme://user:***@``) and the password of
    ``url`` (raw and percent-decoded, wherever it appears; one shorter than 8 characters where it
    stands alone) replaced by ``***``: a last line of defence for messages from code that is not
    ours (the CLI passes every message through it).

    >>> scrub("invalid choice: 'mysql://app:s3cr3t@db:3306/x'")
    "invalid choice: 'mysql://app:***@db:3306/x'"
    >>> scrub("invalid choice: 'mysql://app:pa@ss/w0rd@db:3306/x'")  # an unencoded '@' and '/'
    "invalid choice: 'mysql://app:***@db:3306/x'"
    >>> scrub("invalid choice: 'mysql://app:it's-s3cret@db/x' (choose from 'a', 'b')")  # a quote in it
    "invalid choice: 'mysql://app:***@db/x' (choose from 'a', 'b')"
    >>> scrub("no session 'nope' (password e)", "mysql://op:e@db/x")
    "no session 'nope' (password ***)"
    """
    text = _CREDENTIALS.sub(r"\1***@", text)
    if not url or not isinstance(url, str):
        return text
    _, sep, rest = url.partition("://")
    at = rest.rfind("@")
    if not sep or at < 0 or ":" not in rest[:at]:
        return text
    raw = rest[:at].partition(":")[2]
    for secret in sorted({raw, unquote(raw)}, key=len, reverse=True):
        if len(secret) >= _MASK_ANYWHERE:
            text = text.replace(secret, "***")
        elif secret:
            text = re.sub(r"(?<![A-Za-z0-9])" + re.escape(secret) + r"(?![A-Za-z0-9])", "***", text)
    return text


# ---- TLS options -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TlsOptions:
    """The resolved TLS settings: the mode after the rules, and the files."""

    mode: str = PREFERRED
    ca: Optional[str] = None
    cert: Optional[str] = None
    key: Optional[str] = None

    @property
    def encrypted(self) -> bool:
        """True when a clear-text connection must be refused."""
        return self.mode in ENCRYPTED_MODES


def tls_options(ssl_mode: Optional[str] = None, ssl_ca: Optional[str] = None,
                ssl_cert: Optional[str] = None, ssl_key: Optional[str] = None) -> TlsOptions:
    """Apply the MySQL client's rules: no option is PREFERRED, a CA alone is VERIFY_CA.

    An unknown mode is a ValueError naming ``ssl-mode``; nothing connects before it.
    """
    mode: Optional[str] = None
    if ssl_mode is not None:  # given blank is no mode: refused, as the MySQL client refuses --ssl-mode=
        mode = str(ssl_mode).strip().upper().replace("-", "_")
        if mode not in SSL_MODES:
            raise ValueError(f"ssl-mode must be one of {', '.join(SSL_MODES)} (any case), got {str(ssl_mode)!r}")
    for name, path in (("ssl-ca", ssl_ca), ("ssl-cert", ssl_cert), ("ssl-key", ssl_key)):
        if path is not None and (not isinstance(path, str) or not path.strip()):
            raise ValueError(f"{name} must name a file, got {path!r}")
    if ssl_key and not ssl_cert:
        raise ValueError("ssl-key needs ssl-cert (the client certificate it belongs to)")
    if mode is None:
        mode = VERIFY_CA if ssl_ca else PREFERRED
    if mode in (VERIFY_CA, VERIFY_IDENTITY) and not ssl_ca:
        raise ValueError(f"ssl-mode={mode} needs ssl-ca, the CA certificate the server's must chain to "
                         "(the MySQL client refuses this mode without one); to trust the system's CAs, "
                         "name their bundle, e.g. ssl-ca=/etc/ssl/certs/ca-certificates.crt")
    return TlsOptions(mode, ssl_ca or None, ssl_cert or None, ssl_key or None)


def ssl_context(tls: TlsOptions) -> Optional[ssl.SSLContext]:
    """The SSLContext for ``tls`` (None for DISABLED); files are read now, so a missing CA or
    key is a ValueError at start-up rather than at the first connection.

    PREFERRED and REQUIRED verify nothing (as the MySQL client); VERIFY_* verify the chain
    against ``ssl-ca`` (:func:`tls_options` requires it); VERIFY_IDENTITY also the host.
    An ``ssl-ca`` given with DISABLED, PREFERRED or REQUIRED is still read (a file that
    cannot be read is the same ValueError) and, as the MySQL client does, a warning says that
    nothing is verified with it. A private key protected by a pass phrase is a ValueError
    (OpenSSL would otherwise prompt on the terminal, or fail with an unclear error).
    """
    if tls.mode == DISABLED:
        for name, path in (("ssl-ca", tls.ca), ("ssl-cert", tls.cert), ("ssl-key", tls.key)):
            if path is not None and not _readable(path):  # read in every mode, as documented
                raise ValueError(f"{name} {path!r} cannot be read (ssl-mode=DISABLED does not use it)")
        if tls.ca:
            _unverified(tls.mode)
        return None
    problem: Optional[str] = None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    verify = tls.mode in (VERIFY_CA, VERIFY_IDENTITY)  # with ssl-ca (tls_options requires it)
    if verify:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.check_hostname = tls.mode == VERIFY_IDENTITY
        # Python 3.13 turns on strict X.509 checks that MySQL's auto-generated certs fail.
        ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls.ca:
        try:
            ctx.load_verify_locations(cafile=tls.ca)  # without verification: read, so a bad path is found now
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            problem = f"ssl-ca {tls.ca!r} could not be loaded ({type(exc).__name__}: {exc.args[-1] if exc.args else ''})"
        else:
            if not verify:
                _unverified(tls.mode)
    if problem is None and tls.cert:
        try:
            ctx.load_cert_chain(tls.cert, tls.key, password=_no_pass_phrase)
        except _PassPhrase:
            problem = (f"ssl-key {tls.key or tls.cert!r} is protected by a pass phrase, which nothing can type "
                       "in here; give the key without one (openssl pkey -in key.pem -out plain-key.pem), "
                       "readable by the service's user only")
        except (OSError, ValueError) as exc:
            problem = (f"ssl-cert {tls.cert!r} / ssl-key {tls.key!r} could not be loaded "
                       f"({type(exc).__name__}: {exc.args[-1] if exc.args else ''})")
    if problem is not None:  # raised outside the except: nothing chained
        raise ValueError(problem)
    return ctx


class _PassPhrase(Exception):
    """The private key asked for a pass phrase."""


def _no_pass_phrase() -> bytes:
    raise _PassPhrase  # called by OpenSSL only for a key protected by a pass phrase


def _unverified(mode: str) -> None:
    warnings.warn(f"ssl-ca is given with ssl-mode={mode}: no verification of the server's certificate "
                  "is done (as the MySQL client warns); use ssl-mode=VERIFY_CA or VERIFY_IDENTITY to "
                  "verify it", MysqlStateWarning, stacklevel=caller_stacklevel())


def _readable(path: str) -> bool:
    try:
        with open(path, "rb"):
            return True
    except OSError:
        return False


# ---- parsing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedUrl:
    """A parsed URL; its repr hides the password."""

    user: str
    password: str = field(repr=False)
    hosts: tuple  # ((host, port), ...) in the URL's order
    ports_given: tuple  # whether each host's port was written out
    database: Optional[str]
    unix_socket: Optional[str] = None
    timeouts: dict = field(default_factory=dict)
    tls: dict = field(default_factory=dict)  # raw ssl_* query values, not yet resolved
    user_given: bool = True  # False: "root" stands for a user the URL does not name

    def kwargs(self, index: int = 0) -> dict:
        """pymysql connect kwargs (no TLS) for host ``index`` of the list."""
        host, port = self.hosts[index]
        kwargs: dict = {"user": self.user, "password": self.password, "host": host}
        if self.ports_given[index]:  # else pymysql's default, 3306, as before
            kwargs["port"] = port
        if self.unix_socket is not None:
            kwargs["unix_socket"] = self.unix_socket
        kwargs.update(self.timeouts)
        return kwargs


def _bad(url: str, why: str) -> ValueError:
    hint = ""
    _, sep, rest = url.partition("://")
    end = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    if sep and "@" in rest[end:]:
        hint = " (a password containing / ? # or @ must be percent-encoded, e.g. / as %2F)"
    return ValueError(f"URL {redact(url)}: {why}{hint}")


def _host_port(url: str, item: str) -> tuple[str, Optional[int], bool]:
    """One ``host[:port]`` (``[v6]:port`` too) of the host list; raises a redacted ValueError."""
    if item.startswith("["):
        end = item.find("]")
        if end < 0:
            raise _bad(url, "an IPv6 host needs its closing ']'")
        host, rest = item[1:end], item[end + 1:]
        if rest and not rest.startswith(":"):
            raise _bad(url, "expected ':port' after an IPv6 host")
        port_text = rest[1:] if rest else ""
    else:
        host, _, port_text = item.partition(":")
    host = host.lower() or "localhost"
    if not port_text:
        return host, None, False
    if not (port_text.isascii() and port_text.isdigit()) or not 0 < int(port_text) < 65536:
        raise _bad(url, "a port must be a number from 1 to 65535")
    return host, int(port_text), True


def parse(url: str) -> ParsedUrl:
    """Parse ``url``: user, password, the host list, database and query parameters.

    Every ValueError names the URL only through :func:`redact`, and chains nothing.
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, got {type(url).__name__}")
    parts = None
    try:
        parts = urlsplit(url)
    except ValueError:
        pass
    if parts is None:
        raise _bad(url, "not a valid URL")
    if parts.scheme.split("+")[0].lower() not in ("mysql", "mariadb"):
        raise _bad(url, "must start with mysql:// (or mariadb://)")
    # An '@' after the host part: a password with an unencoded / ? # (or @), whose tail would be
    # read as a database or query parameters (and named in errors). Never in the query either,
    # even with no user part: "app:8080?ssl-mode=x@db" reads as host "app", port 8080, and a
    # password's tail as the query (a file path holding an '@' is given as %40).
    if "@" in parts.path or "@" in parts.fragment or "@" in parts.query:
        raise _bad(url, "an '@' after the host part")  # _bad's hint: a password with / ? or # unencoded
    if parts.fragment or url.endswith("#"):
        raise _bad(url, "a '#' has no meaning in it")
    userinfo, at, hostlist = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":") if at else ("", "", "")
    items = hostlist.split(",")
    if len(items) > 1 and not all(item.strip() for item in items):
        raise _bad(url, "an empty host in the host list")
    hosts: list = []
    ports_given: list = []
    for item in items:
        host, port, given = _host_port(url, item.strip())
        hosts.append((host, port or DEFAULT_PORT))
        ports_given.append(given)
    query: dict = {}
    for key, values in parse_qs(parts.query, keep_blank_values=True).items():
        query[key.replace("-", "_").lower()] = values[-1]
    unix_socket = query.pop("unix_socket", None)
    if unix_socket is not None and not unix_socket.strip():
        raise _bad(url, "unix_socket must name a socket file, got ''")
    timeouts: dict = {}
    for name in _TIMEOUTS:
        if name in query:
            value = query.pop(name)
            try:
                timeouts[name] = float(value)
            except ValueError:
                timeouts[name] = None
            if timeouts[name] is None or not 0 < timeouts[name] < float("inf"):
                raise _bad(url, f"{name} must be a positive, finite number of seconds, got {value[:20]!r}")
    tls = {key: query.pop(key) for key in TLS_KEYS if key in query}
    if query:
        names = sorted(k if re.fullmatch(r"[a-z0-9_]{1,40}", k) else "<a name that is none>" for k in query)
        raise _bad(url, f"unknown query parameters {names} (known: unix_socket, "
                        f"{', '.join(_TIMEOUTS)}, ssl-mode, ssl-ca, ssl-cert, ssl-key)")
    return ParsedUrl(
        user=unquote(user) or "root",
        user_given=bool(unquote(user)),
        password=unquote(password),
        hosts=tuple(hosts),
        ports_given=tuple(ports_given),
        database=unquote(parts.path.lstrip("/")) or None,
        unix_socket=unix_socket,
        timeouts=timeouts,
        tls=tls,
    )


def parse_hosts(url: str) -> list[tuple[str, int]]:
    """The URL's hosts as ``(host, port)`` in order (one for a single host; port 3306 if
    not given).

    >>> parse_hosts("mysql://u:pw@h1:3306,h2:3307,h3/db")
    [('h1', 3306), ('h2', 3307), ('h3', 3306)]
    """
    return list(parse(url).hosts)


def parse_url(url: str) -> tuple[dict, Optional[str]]:
    """pymysql connect kwargs for the first host (without TLS), and the URL's database.

    >>> parse_url("mysql://u:p%40ss@db:3307/agents?unix_socket=/run/mysqld.sock")[1]
    'agents'
    """
    parsed = parse(url)
    tls_options(**parsed.tls)  # a bad ssl-mode is an error here too
    return parsed.kwargs(0), parsed.database


def check_keywords(given: Any, own: Any) -> None:
    """``from_url``'s keywords beyond its own options (``own``: their names) go to
    ``pymysql.connect``: one that it does not take either is a TypeError naming it and the
    closest option, before any connection (the driver's own error names neither ``from_url``
    nor its options).

    >>> check_keywords({"pool_sise": 3}, ["pool_size", "pool_timeout"])
    Traceback (most recent call last):
    ...
    TypeError: from_url() got an unexpected keyword argument 'pool_sise' (did you mean 'pool_size'?): besides its own options (docs/api.md), a keyword must be one pymysql.connect takes
    """
    import difflib
    import inspect

    taken = {*inspect.signature(pymysql.connections.Connection.__init__).parameters, *TLS_KEYS} - {"self"}
    for name in given:
        if name not in taken:
            close = difflib.get_close_matches(name, [*own, *sorted(taken)], n=1)
            raise TypeError(f"from_url() got an unexpected keyword argument {name!r}"
                            + (f" (did you mean {close[0]!r}?)" if close else "")
                            + ": besides its own options (docs/api.md), a keyword must be one pymysql.connect takes")


def connect_args(url: str, host_index: int = 0, **overrides: Any) -> tuple[dict, Optional[str]]:
    """Keyword arguments for :func:`connect` (host ``host_index``), and the URL's database.

    ``overrides`` are pymysql keywords, plus ``ssl_mode``/``ssl_ca``/``ssl_cert``/``ssl_key``
    which win over the URL's parameters; the SSLContext is built here, before any connection.
    """
    own = sorted(k for k in _OWN_KEYS if k in overrides)
    if own:
        raise ValueError("; ".join(f"{k}= is not an option: {_OWN_KEYS[k]}" for k in own) + "; nothing connected")
    clash = sorted(k for k in _PYMYSQL_TLS_KEYS if k in overrides)
    if clash:
        raise ValueError(f"{clash} are pymysql's TLS options; use ssl_mode, ssl_ca, ssl_cert and "
                         "ssl_key (the MySQL client's rules)")
    parsed = parse(url)
    kwargs = parsed.kwargs(host_index)
    kwargs.update((k, v) for k, v in overrides.items() if k not in TLS_KEYS)
    options = option_file(kwargs.get("read_default_file"), kwargs.get("read_default_group"))
    raw_tls = {key: options[key] for key in TLS_KEYS if key in options}  # the lowest layer
    raw_tls.update(parsed.tls)
    for key in TLS_KEYS:
        if overrides.get(key) is not None:
            raw_tls[key] = overrides[key]
    tls = tls_options(**raw_tls)
    if not parsed.user_given and "user" not in overrides and options.get("user"):
        kwargs["user"] = options["user"]  # the MySQL client's rule: an option not given comes from the file
    socket = kwargs.get("unix_socket") or options.get("socket")
    if socket is not None and (not isinstance(socket, str) or not socket.strip()):
        raise ValueError(f"unix_socket must name a socket file, got {socket!r}")
    kwargs["ssl_mode"] = tls.mode
    kwargs["ssl"] = ssl_context(tls)
    if socket and tls.mode == PREFERRED:  # the MySQL client's rule: PREFERRED does not encrypt a socket
        kwargs["ssl"] = None
    return kwargs, parsed.database


def _not_an_option_file(path: Any) -> ValueError:
    """The error of an option file that cannot be parsed, naming it without quoting its text
    (configparser's own errors quote the offending line: maybe a password line)."""
    return ValueError(f"the option file read_default_file={path!r} is not a MySQL option file (a [client] "
                      "section header, then key=value lines); its text is not shown")


#: What an option file's group may set of TLS, as the MySQL client's options of those names.
_FILE_TLS = {"ssl-mode": "ssl_mode", "ssl-ca": "ssl_ca", "ssl-cert": "ssl_cert", "ssl-key": "ssl_key"}


def option_file(path: Any, group: Any = None) -> dict:
    """What ``read_default_file`` (group ``read_default_group``, else ``client``) says of the
    TLS options (``ssl_mode``, ``ssl_ca``, ``ssl_cert``, ``ssl_key``), the ``user`` and the
    ``socket``, as the MySQL client reads them: under what the URL and the keywords give. A
    file that cannot be read, or that sets a TLS option this library does not apply (MariaDB's
    ``ssl``, ``ssl-verify-server-cert``, ``tls-version``, ...), is a ValueError naming it, so
    that no setting of the file is silently dropped; no value of the file is ever shown.

    >>> option_file(None)
    {}
    """
    if path is None:
        return {}
    where = f"the option file read_default_file={path!r}"
    parser = OptionFileParser()
    unreadable = False
    try:
        with open(os.path.expanduser(str(path)), encoding="utf-8") as f:
            parser.read_file(f)
    except OSError as exc:
        raise ValueError(f"{where} cannot be read ({exc.strerror}); the MySQL client stops on a missing "
                         "defaults file too; nothing connected") from None
    except (configparser.Error, UnicodeDecodeError):
        unreadable = True  # configparser quotes the offending line: maybe a password line
    if unreadable:  # raised outside the handler: the quoting error is not kept as its context
        raise _not_an_option_file(path)
    for each in parser.sections():  # the MySQL client reads what they name; pymysql would not
        included = next((key for key in parser.options(each) if key.startswith("!include")), None)
        if included is not None:
            raise ValueError(f"{where} has an {included.split()[0]} line in [{each}]: this library reads one "
                             "file, so settings there (TLS ones among them) would be dropped; put them in the "
                             "file itself; nothing connected")
    section = str(group or "client")
    if not parser.has_section(section):
        return {}
    found: dict = {}
    for key in parser.options(section):
        if key in _FILE_TLS or key in ("user", "socket"):
            value = parser.get(section, key)
            found[_FILE_TLS.get(key, key)] = "" if value is None else value
        elif key.startswith(("ssl", "tls")):
            raise ValueError(f"{where} sets {key} in [{section}], which this library does not apply: it takes "
                             "ssl-mode, ssl-ca, ssl-cert and ssl-key, as the MySQL client does (MariaDB's ssl is "
                             "ssl-mode=REQUIRED, its ssl-verify-server-cert ssl-mode=VERIFY_IDENTITY); nothing "
                             "connected")
    return found


# ---- connecting --------------------------------------------------------------------------------


class Connection(pymysql.connections.Connection):
    """A pymysql connection that applies ``ssl_mode`` itself.

    pymysql's own handling differs by version: 1.x goes on in clear text when the server
    offers no TLS, newer releases refuse then but only when given TLS options. Here the
    server's capability is checked right after its greeting, before credentials are sent,
    and the socket is checked once connected.
    """

    #: The server thread id this connection's session was set READ COMMITTED on by the pool
    #: (``pool.Connector``): a reconnect gets another thread, whose session is set again.
    isolated_thread: Optional[int] = None
    #: pymysql's own timeouts (set in its ``__init__``), declared for the type checker only:
    #: :meth:`connect` reads and sets them.
    _read_timeout: Optional[float]
    _write_timeout: Optional[float]

    def __init__(self, *args: Any, ssl_mode: str = PREFERRED, **kwargs: Any) -> None:
        #: The longest lock wait (row or metadata lock, whole seconds) this connection's writes
        #: should meet: half its read timeout, so that a wait ends in the server's 1205 (retried)
        #: before the read timeout cuts the connection (``sql.CAP_LOCK_WAIT``); None without one.
        read_timeout = kwargs.get("read_timeout")
        self.lock_wait_seconds: Optional[int] = max(1, int(read_timeout // 2)) if read_timeout else None
        self._ssl_mode = ssl_mode  # set first: pymysql connects inside __init__
        self._tls_wanted = ssl_mode != DISABLED and kwargs.get("ssl") is not None
        unreadable = False
        try:
            super().__init__(*args, **kwargs)
        except configparser.Error:
            # pymysql reads an option file (read_default_file) with configparser, whose errors
            # quote the offending line: a password line. Named without its text, raised outside
            # the handler so that the quoting error is not kept as its context either.
            unreadable = True
        if unreadable:
            raise _not_an_option_file(kwargs.get("read_default_file"))

    def _get_server_information(self) -> None:
        super()._get_server_information()
        offered = bool(self.server_capabilities & CLIENT.SSL)
        if self._ssl_mode in ENCRYPTED_MODES and not offered:
            raise pymysql.err.OperationalError(
                CR_SSL_CONNECTION_ERROR,
                f"the server at {self.host}:{self.port} does not offer TLS, and "
                f"ssl-mode={self._ssl_mode} refuses clear text",
            )
        self.ssl = self._tls_wanted and offered
        if self.ssl:
            self.client_flag |= CLIENT.SSL
        else:
            self.client_flag &= ~CLIENT.SSL

    def closed_by_peer(self) -> bool:
        """Whether the server (or a proxy) closed this idle connection: its socket is readable
        while nothing was asked (an end of file, a reset, a TLS alert). One ``select`` call, no
        round trip: checked before a packet that carries a COMMIT is sent, so that a connection
        the server dropped while idle is re-opened rather than leave that COMMIT unknown."""
        sock = self._sock
        if sock is None:
            return True
        try:
            return bool(select.select([sock], [], [], 0)[0])
        except (OSError, ValueError):  # a closed descriptor
            return True

    def connect(self, sock: Any = None) -> None:
        # A new session: set up again by the pool, even when a server restarted since hands out
        # the thread id the old session had (ids start again from 1).
        self.isolated_thread = None
        failure: Optional[ssl.SSLError] = None
        # The handshake is part of connecting: pymysql waits for the server's greeting (and
        # for authentication) with the read timeout, so a host that accepts connections but
        # does not answer (frozen, paused) held a new connection for read_timeout, not
        # connect_timeout. Both timeouts are the connect one until connected.
        timeouts = (self._read_timeout, self._write_timeout)
        bound = min(t for t in (self.connect_timeout, *timeouts) if t) if self.connect_timeout else None
        if bound:
            self._read_timeout = self._write_timeout = bound
        try:
            super().connect(sock)
        except pymysql.err.OperationalError as exc:
            found = tls_failure(exc)
            failure = found if isinstance(found, ssl.SSLError) else None
            if failure is None:
                raise
        finally:
            self._read_timeout, self._write_timeout = timeouts  # pymysql sets the socket's on the next read
        if failure is not None:  # re-raised outside the except: chained to the TLS error only
            exc2 = pymysql.err.OperationalError(
                CR_SSL_CONNECTION_ERROR,
                f"TLS with {self.host}:{self.port} failed (ssl-mode={self._ssl_mode}): "
                f"{getattr(failure, 'verify_message', None) or failure.reason or type(failure).__name__}",
            )
            exc2.host = f"{self.host}:{self.port}"
            raise exc2 from failure
        if self._ssl_mode in ENCRYPTED_MODES and not isinstance(self._sock, ssl.SSLSocket):
            self._force_close()
            raise pymysql.err.OperationalError(
                CR_SSL_CONNECTION_ERROR,
                f"the connection to {self.host}:{self.port} is not encrypted, and "
                f"ssl-mode={self._ssl_mode} refuses clear text",
            )


def connect(**kwargs: Any) -> Connection:
    """Open a :class:`Connection`: the creator DBUtils pools call (kwargs from connect_args)."""
    return Connection(**kwargs)


# DBUtils finds the DB-API module (its exception classes) and thread safety through these.
connect.dbapi = pymysql  # type: ignore[attr-defined]
connect.threadsafety = pymysql.threadsafety  # type: ignore[attr-defined]
