"""Free-port checks for services that bind 127.0.0.1.

We prefer fixed, memorable ports; when one is taken by something else we pick a
free one and say so, rather than fail or (worse) talk to a stranger's server.
"""

import socket

HOST = "127.0.0.1"


def is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def any_free() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def choose(preferred: int, taken: set[int] = frozenset()) -> tuple[int, str | None]:
    """Return (port, note). The note says why we did not use `preferred`."""
    if preferred not in taken and is_free(preferred):
        return preferred, None
    port = any_free()
    while port in taken:
        port = any_free()
    return port, f"port {preferred} is taken on {HOST}; using {port}"


def answers(port: int, timeout: float = 0.5, host: str = HOST) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
