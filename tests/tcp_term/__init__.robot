*** Settings ***
Documentation       TCP termination (seed 001): an iperf3 server terminates TCP on the DUT and an
...                 iperf3 client on the TG sends to it (``-R``: receives from it); the receiver's
...                 figure is reported. On ``1node`` client and server share the node (loopback).
...                 One file per stack: ``kernel.robot`` (Linux) and ``vpp.robot`` (VPP's host
...                 stack through LD_PRELOAD), same test body (``resources/tcp.resource``).
Test Tags           TCP_TERM
