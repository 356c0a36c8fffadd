"""The VPP layer: VPP's startup config, its binary API, its host stack and its CLI on a node.

Owns startup.conf and VCL parameters (``conf_params``), the PAPI connection over a forwarded API
socket with every reply's retval checked (``papi``), interface and host-stack configuration
through PAPI (``hoststack``, ``loopback``), a node's link interfaces handed to VPP by driver
(``ports``: af_packet, dpdk, dpdk_vdev), ``vppctl`` show commands and their parsers
(``vppctl``), ``show runtime``/``show session`` counters of a measured trial (``runtime``),
the lifecycle of VPP on a topology node (``instance``), and where a suite's applications sit on
its VPPs: app namespaces, addresses, the LD_PRELOAD + VCL environment (``placement``).
Imports only ``libraries.testbed`` and ``libraries.tools`` (template rendering).
"""
