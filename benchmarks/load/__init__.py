"""The service under load: ``service_load`` (throughput, latency and learner lag of predict +
feedback pairs; its parts ``client``, ``supervisor``, ``phases``, ``report``), ``freshness``
(replica staleness), ``swap_stall``, ``faults`` and ``fuzz``."""
