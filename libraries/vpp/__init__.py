"""The VPP layer: VPP's startup config, its binary API, its host stack and its CLI on a node.

Owns startup.conf and VCL parameters (``config``), the PAPI connection over a forwarded API
socket with every reply's retval checked (``papi``), interface and host-stack configuration
through PAPI (``hoststack``, ``loopback``), ``vppctl`` show commands and their parsers
(``vppctl``), ``show runtime``/``show session`` counters of a measured trial (``runtime``),
and the lifecycle of VPP on a topology node (``node``). Imports only ``libraries.testbed``
and ``libraries.tools`` (template rendering).
"""
