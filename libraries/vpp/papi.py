"""VPP binary API (PAPI) connection: vpp_papi over VPP's API unix socket, every retval checked.

``PapiConnection`` wraps ``vpp_papi.VPPApiClient`` with clear errors for the usual failures
(socket missing, VPP not running, definitions missing, message unknown to this VPP) and a
single ``call()`` that raises ``PapiError`` on any non-zero ``retval``. The socket is a local
path: forwarding the DUT's ``/run/vpp/api.sock`` over SSH is the node layer's job.
``fetch_api_definitions`` copies the DUT's own ``*.api.json`` files to the runner.
"""

from __future__ import annotations

import base64
import binascii
import io
import logging
import shlex
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from libraries.testbed.errors import PapiError

if TYPE_CHECKING:
    from libraries.testbed.node import Node

logger = logging.getLogger(__name__)

DEFAULT_API_DIR = "/usr/share/vpp/api"
DEFAULT_API_SOCKET = "/run/vpp/api.sock"
API_FILE_SUFFIX = ".api.json"


def format_call(message: str, fields: dict[str, Any]) -> str:
    """Render a call as ``message(a=1, b='x')`` with the fields sorted by name."""
    args = ", ".join(f"{key}={value!r}" for key, value in sorted(fields.items()))
    return f"{message}({args})"


def _api_files(api_dir: Path) -> list[Path]:
    return sorted(path for path in api_dir.rglob(f"*{API_FILE_SUFFIX}") if path.is_file())


class PapiConnection:
    """One vpp_papi client connected to one VPP API socket.

    ``connect(name)`` loads the definitions from ``api_dir`` and performs the socket handshake;
    ``call(message, **fields)`` sends one request and returns its reply (a namedtuple with the
    reply's fields, e.g. ``retval``, ``sw_if_index``) or, for dumps, the list of details.
    Usable as a context manager (connects on enter unless already connected).
    """

    def __init__(self, socket_path: str = DEFAULT_API_SOCKET, api_dir: str = DEFAULT_API_DIR,
                 read_timeout: float = 5.0) -> None:
        self.socket_path = socket_path
        self.api_dir = api_dir
        self.read_timeout = read_timeout
        self._client: Any = None

    @property
    def connected(self) -> bool:
        """True between a successful ``connect()`` and ``disconnect()``."""
        return self._client is not None

    def connect(self, name: str = "hoststack-perf") -> None:
        """Connect to VPP as API client ``name``; raises PapiError saying what is missing."""
        if self._client is not None:
            raise PapiError(f"PAPI client already connected to {self.socket_path}")
        self._check_api_dir()
        self._check_socket()
        from vpp_papi import VPPApiClient  # noqa: PLC0415 - heavy import, only when connecting

        try:
            client = VPPApiClient(apidir=self.api_dir, server_address=self.socket_path,
                                  use_socket=True, read_timeout=self.read_timeout)
        except Exception as err:
            raise PapiError(f"cannot load the VPP API definitions in {self.api_dir}: "
                            f"{type(err).__name__}: {err}") from err
        missing = [m for m in ("sockclnt_create", "control_ping") if m not in client.messages]
        if missing:
            raise PapiError(f"the VPP API definitions in {self.api_dir} lack {missing} "
                            "(core/memclnt.api.json): point api_dir at the directory holding "
                            "core/ and plugins/")
        try:
            client.connect(name)
        except ConnectionRefusedError as err:
            self._close_quietly(client)
            raise PapiError(f"VPP API socket {self.socket_path} refuses connections: "
                            "is VPP running? (the socket file may be stale)") from err
        except FileNotFoundError as err:
            self._close_quietly(client)
            raise PapiError(f"VPP API socket {self.socket_path} does not exist: "
                            "is VPP running?") from err
        except PermissionError as err:
            self._close_quietly(client)
            raise PapiError(f"no permission to open VPP API socket {self.socket_path}: "
                            "run as root or as a member of VPP's socket group") from err
        except (TimeoutError, OSError, ValueError) as err:
            self._close_quietly(client)
            raise PapiError(f"VPP at {self.socket_path} did not complete the API handshake "
                            f"within {self.read_timeout:g} s: {type(err).__name__}: {err}"
                            ) from err
        self._client = client
        logger.info("PAPI connected to %s as %r (definitions %s)",
                    self.socket_path, name, self.api_dir)

    def disconnect(self) -> None:
        """Leave VPP; safe to call when not connected (waits up to read_timeout if VPP hangs)."""
        client, self._client = self._client, None
        if client is None:
            return
        try:
            client.disconnect()
        except Exception as err:
            logger.warning("PAPI disconnect from %s failed: %s", self.socket_path, err)
        else:
            logger.info("PAPI disconnected from %s", self.socket_path)

    def __enter__(self) -> PapiConnection:
        if not self.connected:
            self.connect()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.disconnect()

    def has_message(self, message: str) -> bool:
        """True if both the definitions and the connected VPP know ``message`` (same CRC)."""
        return hasattr(self._require_client().api, message)

    def call(self, message: str, **fields: Any) -> Any:
        """Send ``message`` with ``fields``; return the reply, or a list of details for dumps.

        Raises PapiError on a non-zero retval (of the reply or of any detail carrying one),
        on an unknown message, on invalid fields, and when VPP does not answer.
        """
        client = self._require_client()
        function = getattr(client.api, message, None)
        if function is None:
            raise self._unknown_message(client, message)
        text = format_call(message, fields)
        logger.debug("PAPI call %s", text)
        try:
            reply = function(**fields)
        except (TypeError, ValueError) as err:
            root: BaseException = err
            while root.__cause__ is not None:
                root = root.__cause__
            reason = str(err) if root is err else f"{err} ({type(root).__name__}: {root})"
            raise PapiError(f"VPP PAPI {text}: invalid arguments: {reason}") from err
        except OSError as err:
            raise PapiError(f"VPP PAPI {text}: no reply from VPP at {self.socket_path} "
                            f"(VPP stopped or closed the API socket): {err}") from err
        logger.debug("PAPI reply %s: %r", message, reply)
        return self._checked(text, reply)

    @staticmethod
    def _checked(text: str, reply: Any) -> Any:
        if isinstance(reply, tuple) and len(reply) == 2 and isinstance(reply[1], list):
            # stream service with its own final reply: (reply, [details])
            PapiConnection._check_retval(text, reply[0])
            reply = reply[1]
        if isinstance(reply, list):
            for detail in reply:
                PapiConnection._check_retval(text, detail)
            return reply
        PapiConnection._check_retval(text, reply)
        return reply

    @staticmethod
    def _check_retval(text: str, reply: Any) -> None:
        retval = getattr(reply, "retval", 0)
        if retval != 0:
            raise PapiError(f"VPP PAPI {text} -> retval {retval}")

    def _require_client(self) -> Any:
        if self._client is None:
            raise PapiError(f"PAPI is not connected to {self.socket_path}: call connect() first")
        return self._client

    def _unknown_message(self, client: Any, message: str) -> PapiError:
        definition = client.messages.get(message)
        if definition is None or message not in client.services:
            return PapiError(f"message {message!r} is not defined by the VPP API definitions "
                             f"in {self.api_dir}")
        return PapiError(f"message {message!r} (crc {definition.crc}) is defined in "
                         f"{self.api_dir} but not offered by the VPP at {self.socket_path}: "
                         "different VPP version or plugin not loaded")

    def _check_api_dir(self) -> None:
        path = Path(self.api_dir)
        if not path.is_dir():
            raise PapiError(f"VPP API definitions directory {self.api_dir} does not exist")
        if not _api_files(path):
            raise PapiError(f"VPP API definitions directory {self.api_dir} contains no "
                            f"*{API_FILE_SUFFIX} files")

    def _check_socket(self) -> None:
        path = Path(self.socket_path)
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            raise PapiError(f"VPP API socket {self.socket_path} does not exist: "
                            "is VPP running?") from None
        if not stat.S_ISSOCK(mode):
            raise PapiError(f"VPP API socket {self.socket_path} is not a unix socket")

    @staticmethod
    def _close_quietly(client: Any) -> None:
        try:
            client.disconnect()
        except Exception as err:
            logger.debug("cleanup after failed PAPI connect: %s", err)


@dataclass(frozen=True)
class FetchedDefinitions:
    """API definitions copied from a node: ``local_dir`` and the number of ``files``."""

    local_dir: str
    files: int


def fetch_api_definitions(node: Node, remote_dir: str = DEFAULT_API_DIR,
                          local_dir: str = "vpp_api", timeout: float = 60.0
                          ) -> FetchedDefinitions:
    """Copy ``remote_dir``'s ``*.api.json`` tree from ``node`` into ``local_dir``.

    One command on the node (``tar | base64``); only regular ``*.api.json`` files with
    relative paths are extracted, keeping the ``core/`` and ``plugins/`` layout.
    Raises PapiError if the directory is missing on the node or holds no definitions.
    """
    quoted = shlex.quote(remote_dir)
    command = (f"test -d {quoted} || {{ echo 'no such directory' >&2; exit 3; }}; "
               f"tar -C {quoted} -czf - . | base64")
    result = node.run(command, timeout=timeout, check=False)
    exit_code = getattr(result, "exit_code", 0)
    if exit_code != 0:
        detail = (getattr(result, "stderr", "") or result.stdout).strip()[-500:]
        raise PapiError(f"{node.name}: cannot read VPP API definitions from {remote_dir} "
                        f"(exit {exit_code}): {detail}")
    try:
        archive = base64.b64decode(result.stdout)
        count = _extract_api_files(archive, Path(local_dir))
    except (binascii.Error, tarfile.TarError, EOFError, OSError) as err:
        raise PapiError(f"{node.name}: the archive of {remote_dir} could not be unpacked "
                        f"into {local_dir}: {type(err).__name__}: {err}") from err
    if count == 0:
        raise PapiError(f"{node.name}: {remote_dir} holds no *{API_FILE_SUFFIX} files: "
                        "is VPP installed there?")
    logger.info("fetched %d VPP API definition files from %s:%s into %s",
                count, node.name, remote_dir, local_dir)
    return FetchedDefinitions(local_dir=local_dir, files=count)


def _extract_api_files(archive: bytes, local_dir: Path) -> int:
    count = 0
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar.getmembers():
            relative = PurePosixPath(member.name)
            if (not member.isfile() or not member.name.endswith(API_FILE_SUFFIX)
                    or relative.is_absolute() or ".." in relative.parts):
                continue
            source = tar.extractfile(member)
            if source is None:
                continue
            target = local_dir.joinpath(*relative.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read())
            count += 1
    return count
