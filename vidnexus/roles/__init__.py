"""The roles of a deployment: ingest, worker, executor, scheduler and sink (DESIGN §2).

Each is a class built from injected settings, a :class:`~vidnexus.clock.Clock`, a
:class:`~vidnexus.connectors.bus.Bus` and (for those that need one) a
:class:`~vidnexus.connectors.store.Store`, with ``start``, ``step`` (one unit of work, what tests
drive) and ``stop``, and ``run(stop_event)`` looping ``step``. Distributed mode runs each in its own
process (``vidnexus ingest|worker|executor|scheduler|sink``) over Kafka; embedded mode
(:mod:`vidnexus.roles.embedded`, ``vidnexus run``) runs the same classes in one process over the
in-memory bus and chdb. Roles talk only through :mod:`vidnexus.contracts`.
"""
