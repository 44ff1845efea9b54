"""Workloads: Squid native access.log replay and the synthetic scenario generator (paper
sec. 3.3)."""
