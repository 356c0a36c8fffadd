"""The testbed layer: what a topology file says, how a node is reached, how a local one is built.

Owns the topology model (``topology``, read by ``topology_file``), command execution on a
node over SSH (``node``; the login target, trusted host keys and login errors in ``ssh``,
below ``node``), a command as one value (an argv or a script) and the one place it becomes
a shell line, with its pinning, environment, CPU ledger and hard timeout (``command``: every
tool's runner builds one, ``Node.run`` and ``Node.start`` take it), network-namespace
provisioning of ``provision: netns`` topologies (``netns``, ``provision``), a run's prefix
and its nodes' work directories, named once (``run_paths``), the pre-flight
ping check of every testbed's links and routes (``preflight``) and the error types every other
package raises (``errors``). It is the lowest layer: it imports nothing else of
``libraries``. ``python -m libraries.testbed up|down|status``
builds, removes or inspects a topology's testbed by hand.
"""
