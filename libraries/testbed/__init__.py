"""The testbed layer: what a topology file says, how a node is reached, how a local one is built.

Owns the topology model (``topology``), command execution on a node over SSH (``node``,
``shell``), network-namespace provisioning of ``provision: netns`` topologies (``netns``,
``provision``) and the error types every other package raises (``errors``). It is the lowest
layer: it imports nothing else of ``libraries``. ``python -m libraries.testbed up|down|status``
builds, removes or inspects a topology's testbed by hand.
"""
