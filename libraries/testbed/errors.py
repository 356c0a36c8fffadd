"""Exception types shared by every library module.

Each error's message says what failed, where (file, key path, node, command) and what was
expected, so that the Robot log line alone is enough to act on.
"""

from __future__ import annotations


class HostStackError(Exception):
    """Base class of every error raised by this project."""


class TopologyError(HostStackError):
    """A topology file is missing, unreadable or invalid (message names file and key path)."""


class NodeError(HostStackError):
    """A node cannot be reached or a command on it failed."""


class CommandError(NodeError):
    """A command exited non-zero (or was refused): carries the node, command and its output."""

    def __init__(self, where: str, command: str, exit_code: int, stdout: str, stderr: str):
        self.where = where
        self.command = command
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        output = (stderr.strip() or stdout.strip())[-2000:]
        super().__init__(f"{where}: command {command!r} exited {exit_code}:\n    {output}")


class CommandTimeout(NodeError):
    """A command ran past its timeout; carries whatever output it produced until then."""

    def __init__(self, where: str, command: str, timeout: float, stdout: str, stderr: str):
        self.where = where
        self.command = command
        self.timeout = timeout
        self.stdout = stdout
        self.stderr = stderr
        partial = (stdout + stderr).strip()[-2000:] or "(no output)"
        super().__init__(
            f"{where}: command {command!r} timed out after {timeout:g} s; partial output:\n"
            f"    {partial}"
        )


class ParseError(HostStackError):
    """Tool output could not be parsed: the message quotes the offending text."""

    def __init__(self, what: str, problem: str, text: str):
        self.text = text
        excerpt = text if len(text) <= 600 else text[:300] + " ... " + text[-300:]
        super().__init__(f"{what}: {problem}; output was: {excerpt!r}")


class RenderError(HostStackError):
    """A config template could not be rendered from its parameters."""


class ToolMissing(HostStackError):
    """A tool the case needs is not installed on the node (tests skip on this)."""


class PapiError(HostStackError):
    """A VPP API call failed: names the message, its arguments and the retval."""
