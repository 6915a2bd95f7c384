"""The engine's processes: the launch command and its trust checks, server supervision,
process trees, GPUs and their locks, ports, and reading the engine's log."""
