"""Streams: the Frame envelope, sampling, and sources (synthetic for now)."""

from vidnexus.contracts.frames import Frame, decode_frame, encode_frame
from vidnexus.streams.sampling import EveryNth, FpsSampler

__all__ = ["Frame", "encode_frame", "decode_frame", "FpsSampler", "EveryNth"]
