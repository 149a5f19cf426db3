"""Discrete-event simulator: the real policy and duty-cycle code on a virtual clock."""

from vidnexus.sim.loadgen import Arrival, poisson_arrivals, uniform_arrivals
from vidnexus.sim.cluster import simulate_cluster
from vidnexus.sim.simulator import SimResult, goodput, simulate

__all__ = ["Arrival", "poisson_arrivals", "uniform_arrivals", "SimResult", "simulate", "goodput",
           "simulate_cluster"]
