"""What a read-only SQL query may call and read: short allow-lists, deny by default.

A function that is not listed here is refused by :mod:`vidnexus.sql_guard`, so a function
ClickHouse adds next year (or one that reads files, URLs, dictionaries, settings or the process)
is refused until someone adds it here, with a reason, after checking that it computes only on its
arguments. Names are compared case-insensitively (ClickHouse's case variants of one function are
aliases of it; ``tests/integration/test_sql_guard_server.py`` checks every name here exists).

Example:
    >>> function_allowed("countIf"), function_allowed("COUNT"), function_allowed("file")
    (True, True, False)
    >>> function_allowed("quantilesTDigestIf"), function_allowed("fileIf")
    (True, False)
"""

from __future__ import annotations

__all__ = ["AGGREGATES", "SCALARS", "SYNTAX_ONLY", "TABLE_FUNCTIONS", "SYSTEM_TABLES", "COMBINATORS", "function_allowed",
           "table_function_allowed"]

AGGREGATES = frozenset(n.lower() for n in """
count sum avg min max any anyLast anyHeavy argMin argMax avgWeighted uniq uniqExact uniqCombined
uniqCombined64 uniqHLL12 uniqUpTo quantile quantiles quantileExact quantilesExact quantileExactLow
quantileExactHigh quantileTDigest quantilesTDigest quantileTiming quantilesTiming quantileDeterministic
quantileExactWeighted quantilesExactWeighted quantileTDigestWeighted median medianExact medianTDigest
groupArray groupUniqArray groupArraySorted groupArrayLast groupArrayMovingAvg groupArrayMovingSum
groupConcat groupBitAnd groupBitOr groupBitXor topK topKWeighted histogram stddevPop stddevSamp varPop
varSamp covarPop covarSamp corr simpleLinearRegression sumWithOverflow sumKahan sumCount entropy
skewPop skewSamp kurtPop kurtSamp deltaSum boundingRatio singleValueOrNull windowFunnel retention
sequenceCount sequenceMatch sparkbar
row_number rank dense_rank denseRank percent_rank cume_dist ntile first_value last_value nth_value
lagInFrame leadInFrame
""".split())
"""Aggregate and window functions (also with the combinators below)."""

COMBINATORS = ("If", "Array", "Distinct", "OrNull", "OrDefault", "Merge", "State", "ForEach",
               "SimpleState", "Resample", "ArgMin", "ArgMax", "Map", "Null")
"""Aggregate combinator suffixes (``sumIf``, ``uniqArrayIf``, …)."""

SCALARS = frozenset(n.lower() for n in """
and or xor not equals notEquals less greater lessOrEquals greaterOrEquals in notIn nullIn notNullIn
like notLike ilike notILike match isNull isNotNull isNotDistinctFrom isZeroOrNull
plus minus multiply divide intDiv intDivOrZero modulo moduloOrZero negate abs gcd lcm
if multiIf coalesce ifNull nullIf assumeNotNull toNullable lambda
tuple tupleElement untuple array arrayElement map mapKeys mapValues mapContains
CAST _CAST accurateCast accurateCastOrNull accurateCastOrDefault toTypeName
toInt8 toInt16 toInt32 toInt64 toInt128 toInt256 toUInt8 toUInt16 toUInt32 toUInt64 toUInt128 toUInt256
toInt8OrZero toInt16OrZero toInt32OrZero toInt64OrZero toUInt8OrZero toUInt16OrZero toUInt32OrZero
toUInt64OrZero toInt32OrNull toInt64OrNull toUInt32OrNull toUInt64OrNull toFloat32 toFloat64
toFloat32OrZero toFloat64OrZero toFloat32OrNull toFloat64OrNull toDecimal32 toDecimal64 toDecimal128
toString toFixedString toBool toUUID toStringCutToZero
round roundBankers roundDown floor ceil ceiling trunc truncate sqrt cbrt exp exp2 exp10 log ln log2
log10 log1p pow power sign greatest least pi e sin cos tan asin acos atan atan2 sinh cosh tanh hypot
isNaN isFinite isInfinite ifNotFinite erf erfc lgamma tgamma degrees radians
bitAnd bitOr bitXor bitNot bitShiftLeft bitShiftRight bitCount
now now64 today yesterday toDateTime toDateTime64 toDate toDate32 toDateOrNull toDateTimeOrNull
toDateOrZero toDateTimeOrZero parseDateTimeBestEffort parseDateTimeBestEffortOrNull
parseDateTime64BestEffort toYear toQuarter toMonth toDayOfYear toDayOfMonth toDayOfWeek toHour
toMinute toSecond toMillisecond toUnixTimestamp toUnixTimestamp64Milli fromUnixTimestamp
fromUnixTimestamp64Milli toStartOfYear toStartOfQuarter toStartOfMonth toStartOfWeek toMonday
toStartOfDay toStartOfHour toStartOfMinute toStartOfSecond toStartOfMillisecond toStartOfFiveMinutes
toStartOfTenMinutes toStartOfFifteenMinutes toStartOfInterval toTime toYYYYMM toYYYYMMDD
toYYYYMMDDhhmmss toRelativeYearNum toRelativeMonthNum toRelativeWeekNum toRelativeDayNum
toRelativeHourNum toRelativeMinuteNum toRelativeSecondNum formatDateTime dateDiff date_diff
dateTrunc date_trunc addSeconds addMinutes addHours addDays
addWeeks addMonths addYears subtractSeconds subtractMinutes subtractHours subtractDays subtractWeeks
subtractMonths subtractYears timeSlot toTimeZone toTimezone age
toIntervalSecond toIntervalMillisecond toIntervalMinute toIntervalHour toIntervalDay toIntervalWeek
toIntervalMonth toIntervalQuarter toIntervalYear
length lengthUTF8 empty notEmpty lower upper lowerUTF8 upperUTF8 reverse reverseUTF8 concat
concatWithSeparator substring substr substringUTF8 left right leftUTF8 rightUTF8 leftPad rightPad
trim trimBoth trimLeft trimRight ltrim rtrim startsWith endsWith position positionCaseInsensitive
locate replace replaceAll replaceOne replaceRegexpAll replaceRegexpOne extract extractAll
splitByChar splitByString splitByRegexp splitByWhitespace arrayStringConcat format repeat
toValidUTF8 hex unhex base64Encode base64Decode
multiSearchAny multiSearchFirstIndex countSubstrings ngramDistance
arrayJoin arrayMap arrayFilter arrayExists arrayAll arrayCount arraySum arrayAvg arrayMin arrayMax
arrayProduct arraySort arrayReverseSort arrayReverse arrayDistinct arrayUniq arrayEnumerate
arrayEnumerateUniq arraySlice arrayConcat arrayZip arrayFirst arrayLast arrayFirstIndex
arrayCumSum arrayDifference arrayCompact arrayPushBack arrayPushFront arrayPopBack arrayPopFront
arrayResize arrayFlatten arrayIntersect arrayStringConcat has hasAll hasAny indexOf countEqual
range emptyArrayString emptyArrayUInt32 arrayWithConstant
cityHash64 sipHash64 xxHash64 xxHash32 murmurHash3_64 farmHash64 halfMD5
formatReadableSize formatReadableQuantity formatReadableTimeDelta bar transform
rand rand64 randCanonical generateUUIDv4 currentDatabase materialize
exists
""".split())
SYNTAX_ONLY = frozenset({"exists", "lambda", "untuple"})
"""Names in :data:`SCALARS` that the parser makes (``EXISTS (…)``, ``x -> …``, ``untuple``) and
``system.functions`` does not list."""
"""Scalar functions and operators: each computes only on its arguments (no I/O, no settings, no
process introspection, no dictionaries)."""

TABLE_FUNCTIONS = frozenset({"numbers", "zeros", "values"})
"""Table functions that generate rows from their arguments alone (the row and time limits cut
``numbers(1e12)``)."""

SYSTEM_TABLES = frozenset({"one", "columns"})
"""``system.*`` tables a read-only query may name: the columns of tables (schema browsing; ``SHOW
TABLES`` and ``DESCRIBE`` do the rest) and the one-row table. ``tables`` (data paths),
``processes``, ``query_log``, ``settings``, ``server_settings``, ``users``, ``stack_trace`` … are
refused: they show the host's paths, other clients' queries and the configuration."""


def function_allowed(name: str) -> bool:
    """Whether a function may be called in a read-only query (aggregates with combinators too)."""
    low = name.lower()
    if low in SCALARS or low in AGGREGATES:
        return True
    stripped = True
    while stripped:
        stripped = False
        for suffix in COMBINATORS:
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                stripped = True
                if name.lower() in AGGREGATES:
                    return True
    return False


def table_function_allowed(name: str) -> bool:
    """Whether a table function may appear in FROM (pure generators only)."""
    return name.lower() in TABLE_FUNCTIONS
