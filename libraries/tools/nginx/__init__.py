"""nginx: the configs the cases run (seed 000's HTTPS server and reverse proxy, seed 003's
stream proxy) and an nginx instance's life on a node.

Owns the typed, self-checking parameter objects of the HTTPS server, the SSL reverse proxy
and upstream TLS (``config``), of the stream proxy and the stream eBPF module's directives
(``stream``), the field checks they share (``fields``), and starting an instance under the
node's process tracking: upload, ``nginx -t``, start, wait for its ports, ``stub_status``
counts, liveness (``service``). Templates live in ``templates/nginx/``.

Other tool families use only the names below (``from libraries.tools.nginx import ...``).
"""

from libraries.tools.nginx.config import NginxInstance
from libraries.tools.nginx.fields import directive_problem
from libraries.tools.nginx.stream import StreamProxyParams, StreamServer

__all__ = ["NginxInstance", "StreamProxyParams", "StreamServer", "directive_problem"]
