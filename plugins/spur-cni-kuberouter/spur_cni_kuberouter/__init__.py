"""k0s built-in kube-router CNI (full IPIP overlay) for Spur-managed k0s."""
