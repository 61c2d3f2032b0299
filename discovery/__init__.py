"""Peer discovery."""
