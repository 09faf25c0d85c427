"""`roost stress`: scheduling policies on a simulated cluster, on the virtual clock."""
