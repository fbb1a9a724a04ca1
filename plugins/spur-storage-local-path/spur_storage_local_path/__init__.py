"""local-path-provisioner as the default StorageClass of Spur-managed k0s."""
