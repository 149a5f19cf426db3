"""What crosses processes: topic names, session keys, replies with their drop reasons, frames,
requests, rows, the scheduler's plans, executor stats and app reports — frozen dataclasses with
versioned codecs. Every role imports these and nothing heavier to talk to another role.

Modules (import them directly; this package imports nothing, so that pure policies can use
``sessions``, ``replies`` and ``profile`` without loading numpy or msgpack):

- ``topics``: :class:`Topics`, every topic name under one prefix, one dead-letter rule;
- ``sessions``: :class:`SessionKey` (model, SLO) and its one string form;
- ``replies``: :class:`Reply` and :data:`DropReason`;
- ``frames``, ``requests``, ``rows``: the data-plane records (msgpack);
- ``plans``, ``stats``, ``reports``: the control-plane documents (JSON);
- ``profile``: ℓ(b) profiles, which stats carry and both planes read;
- ``schema``: table schemas, which rows messages carry.
"""
