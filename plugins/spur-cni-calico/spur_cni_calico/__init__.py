"""Calico CNI (bird over the WireGuard mesh, vxlan otherwise) for Spur-managed k0s."""
