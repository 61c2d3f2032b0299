"""Test and benchmark labs: real hosts in network namespaces on this machine."""
