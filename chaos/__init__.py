"""The nemesis run: a real tickwork cluster under injected faults, checked Jepsen's way."""
