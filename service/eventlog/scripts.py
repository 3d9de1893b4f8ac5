"""The Lua scripts of the event log, each with its contract.

Redis runs a script atomically, so the log never holds half an event. Times that decide
something (a reward deadline, whether feedback is late, whether a window has closed) are read
from the Redis server's own clock (``TIME``), never from the caller's: an API replica and a
learner whose clocks disagree still agree on which reward was on time.

Fencing: a model has one writer, the holder of its lease. The lease key holds
``"<owner>|<token>"``, the token a counter incremented at every take; every write of a model
(join, snapshot) passes the value it holds and the script refuses it when the lease moved on.
"""

from __future__ import annotations

__all__ = [
    "DECISION", "DEFERRED_REWARD", "FEEDBACK", "JOIN", "LEASE", "PUBLISH_SERVING", "RELEASE",
    "REPLACE_CONFIG", "SNAPSHOT", "STALENESS",
]

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
"""

#: Log a decision.
#: KEYS: event hash, decisions stream, waiting zset, stats, feature schema.
#: ARGV: decision JSON, reward wait (s), hash TTL (s), event id, request digest, most feature
#: names, decisions stream length bound (0: none), age of the decision (s), reward aggregation
#: ("earliest" | "sum": kept in the event hash, so every later script of the event reads the
#: one its decision was made under), then pairs (feature name, "n"|"s") for the features the
#: caller has not seen confirmed.
#: Returns {1, stream id} logged; {2, decision JSON or "", joined id or ""} the same request
#: was logged before (idempotent retry); {0} the event id was used by another request;
#: {-1, feature, stored type} a feature changed type; {-2, names} the schema is full.
#: The deadline is Redis's clock now, minus the age, plus the wait.
DECISION = (
    """
local ev = KEYS[1]
if redis.call('EXISTS', ev) == 1 then
  local rq, d, j = unpack(redis.call('HMGET', ev, 'rq', 'd', 'joined'))
  if rq == ARGV[5] then return {2, d or '', j or ''} end
  return {0}
end
local new = {}
for i = 10, #ARGV, 2 do
  local seen = redis.call('HGET', KEYS[5], ARGV[i])
  if seen == false then
    new[#new + 1] = ARGV[i]
    new[#new + 1] = ARGV[i + 1]
  elseif seen ~= ARGV[i + 1] then
    return {-1, ARGV[i], seen}
  end
end
if #new > 0 then
  local size = redis.call('HLEN', KEYS[5])
  if size + #new / 2 > tonumber(ARGV[6]) then return {-2, tostring(size)} end
  redis.call('HSET', KEYS[5], unpack(new))
end
"""
    + _NOW
    + """
local deadline = now - tonumber(ARGV[8]) + tonumber(ARGV[2])
local sid
if tonumber(ARGV[7]) > 0 then
  sid = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[7], '*', 'e', ARGV[1])
else
  sid = redis.call('XADD', KEYS[2], '*', 'e', ARGV[1])
end
redis.call('HSET', ev, 'sid', sid, 'deadline', tostring(deadline), 'd', ARGV[1], 'rq', ARGV[5],
           'agg', ARGV[9])
redis.call('EXPIRE', ev, ARGV[3])
redis.call('ZADD', KEYS[3], deadline, ARGV[4])
redis.call('HINCRBY', KEYS[4], 'decisions', 1)
return {1, sid}
"""
)

#: Record a feedback of a decision.
#: KEYS: event hash, feedback stream, stats.
#: ARGV: feedback JSON, the value it adds to the event's sum ("" for none: a label), a token
#: ("" for none) under which it is recorded once: a retry with the same token is a duplicate.
#: Returns {0} unknown or expired event; {1, late} a duplicate (dropped); {2, late} recorded
#: now. ``late`` ("0"/"1"): after the deadline by Redis's clock, or after the event was joined.
#: Under the event's aggregation (its ``agg``, set by DECISION): ``earliest`` (or none) only the
#: first feedback is recorded (a later one is a duplicate); ``sum``: every one is added to the
#: stream, and an on-time one also to the event's ``sum`` (its value) and ``sum_n`` (the count
#: of on-time feedback; the first one is kept as ``fb`` too, for its label and kind). Only
#: on-time feedback can be joined; a late one is kept in the feedback stream for the record.
FEEDBACK = (
    """
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
if ARGV[3] ~= '' and redis.call('HSETNX', KEYS[1], 'once:' .. ARGV[3], '1') == 0 then
  return {1, redis.call('HGET', KEYS[1], 'fb_late') or '0'}
end
local sum = redis.call('HGET', KEYS[1], 'agg') == 'sum'
if not sum and redis.call('HEXISTS', KEYS[1], 'fb') == 1 then
  return {1, redis.call('HGET', KEYS[1], 'fb_late')}
end
"""
    + _NOW
    + """
local late = '0'
local deadline = tonumber(redis.call('HGET', KEYS[1], 'deadline'))
if now > deadline or redis.call('HEXISTS', KEYS[1], 'joined') == 1 then late = '1' end
local sid
if sum then
  sid = redis.call('XADD', KEYS[2], '*', 'e', ARGV[1], 'late', late, 'agg', 'sum')
  if late == '0' then
    if ARGV[2] ~= '' then redis.call('HINCRBYFLOAT', KEYS[1], 'sum', ARGV[2]) end
    redis.call('HINCRBY', KEYS[1], 'sum_n', 1)
  end
else
  sid = redis.call('XADD', KEYS[2], '*', 'e', ARGV[1], 'late', late)
end
if redis.call('HSETNX', KEYS[1], 'fb', ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], 'fb_sid', sid, 'fb_late', late)
end
redis.call('HINCRBY', KEYS[3], 'rewards', 1)
return {2, late}
"""
)

#: Append a joined event, once per decision, if the lease holder asks and the reward is right.
#: KEYS: event hash, waiting zset, joined stream, stats, lease.
#: ARGV: event id, joined JSON, reward, lease value held, expected source ("feedback" |
#: "default"), TTL (s) of the event's tombstone after the join, the number of on-time rewards
#: the caller summed (an event under ``sum``; "" otherwise).
#: Under ``sum`` an event is joined only once its window closed (by Redis's clock, after which
#: FEEDBACK adds nothing to its sum), and only with the count of on-time rewards stored.
#: Returns {-1} the caller does not hold the lease (nothing written); {0} the event expired;
#: {1, joined id} joined before; {3} the expected source is wrong (an on-time feedback exists
#: and "default" was asked, or the window is still open, or no on-time feedback for
#: "feedback"; under ``sum``: the window is open or the count differs): read the event
#: again; {2, joined id} appended now. After the join the decision JSON is dropped from the
#: event hash (the joined stream has it); the rest stays as a tombstone so a repeated event id
#: or feedback is still recognised.
JOIN = (
    """
if redis.call('GET', KEYS[5]) ~= ARGV[4] then return {-1} end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {0}
end
local joined = redis.call('HGET', KEYS[1], 'joined')
if joined then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {1, joined}
end
local fb, late, deadline, agg, n = unpack(redis.call('HMGET', KEYS[1], 'fb', 'fb_late',
                                                      'deadline', 'agg', 'sum_n'))
local on_time = fb and late == '0'
"""
    + _NOW
    + """
if agg == 'sum' then
  n = n or '0'
  if now <= tonumber(deadline) or n ~= ARGV[7] then return {3} end
  on_time = n ~= '0'
end
if ARGV[5] == 'feedback' then
  if not on_time then return {3} end
elseif on_time or now <= tonumber(deadline) then
  return {3}
end
local jid = redis.call('XADD', KEYS[3], '*', 'e', ARGV[2])
redis.call('HSET', KEYS[1], 'joined', jid)
redis.call('HDEL', KEYS[1], 'd')
redis.call('EXPIRE', KEYS[1], ARGV[6])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[4], 'joined', 1)
redis.call('HINCRBYFLOAT', KEYS[4], 'reward_sum', ARGV[3])
return {2, jid}
"""
)

#: Take or renew a lease.  KEYS: lease, fence counter.
#: ARGV: owner, milliseconds, the value held ("" if none), mode ("take" | "renew").
#: Returns {2, value} taken now (a new fencing token); {1, value} renewed; {0, current or ""}
#: not ours ("renew" never takes a free lease: a holder that lost it must reload first).
LEASE = """
local cur = redis.call('GET', KEYS[1])
if cur == false then
  if ARGV[4] == 'renew' then return {0, ''} end
  local value = ARGV[1] .. '|' .. redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
  return {2, value}
end
if cur == ARGV[3] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, cur}
end
return {0, cur}
"""

#: Give a lease back.  KEYS: lease.  ARGV: the value held.  Returns 1 released, 0 not ours.
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

#: Write a model's snapshot (the whole booster and its serving copy).
#: KEYS: snapshot hash, lease, serving-copy hash.  ARGV: lease value held, blob, serving copy,
#: version, id of the last joined event applied, time, model uid, mode ("held": by the lease
#: holder; "initial": the version-0 snapshot of a new model, written only if no snapshot is
#: stored at all: a deleted model's snapshot is deleted with it; "rebuild": by the lease holder,
#: replacing a snapshot found ahead of the log whatever its version, and dropping the published
#: serving copy built on it).
#: Returns {-1} not the lease holder (nothing written); {0, stored version} a newer snapshot
#: of the same model (or, "initial", any snapshot) is stored already; {1} written.
SNAPSHOT = """
local version, uid = unpack(redis.call('HMGET', KEYS[1], 'version', 'uid'))
if ARGV[8] == 'initial' then
  if uid then return {0, version} end
elseif redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return {-1}
end
if ARGV[8] == 'rebuild' then
  redis.call('DEL', KEYS[3])
elseif uid == ARGV[7] and tonumber(version) > tonumber(ARGV[4]) then
  return {0, version}
end
redis.call('HSET', KEYS[1], 'blob', ARGV[2], 'serving', ARGV[3], 'version', ARGV[4],
           'joined_id', ARGV[5], 'ts', ARGV[6], 'uid', ARGV[7])
return {1}
"""

#: Publish a model's serving copy (the frozen booster replicas decide with), fenced like a
#: snapshot.
#: KEYS: the serving-copy hash, the lease.  ARGV: lease value, serving pickle, version, joined
#: id, time, model uid.
#: Returns {1} published; {0, version} a copy at least as new of this model is stored; {-1} the
#: lease moved on.
PUBLISH_SERVING = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return {-1} end
local version, uid = unpack(redis.call('HMGET', KEYS[1], 'version', 'uid'))
if uid == ARGV[6] and tonumber(version) >= tonumber(ARGV[3]) then return {0, version} end
redis.call('HSET', KEYS[1], 'serving', ARGV[2], 'version', ARGV[3], 'joined_id', ARGV[4],
           'ts', ARGV[5], 'uid', ARGV[6])
return {1}
"""

#: How stale a copy of a model and its latest snapshot are (read only).
#: KEYS: the joined stream, the snapshot hash.  ARGV: the joined id the copy applied last.
#: Returns {Redis time in ms, id of the first joined event after ARGV[1] or '', id of the first
#: joined event after the snapshot's or ''}.
STALENESS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function first_after(id)
  local e = redis.call('XRANGE', KEYS[1], '(' .. id, '+', 'COUNT', 1)
  if #e == 0 then return '' end
  return e[1][1]
end
local snap = redis.call('HGET', KEYS[2], 'joined_id') or '0-0'
return {tostring(now), first_after(ARGV[1]), first_after(snap)}
"""

#: A Personalizer reward for an event that may be deferred (ranked, not yet activated).
#: KEYS: the event hash, the deferred event hash.  ARGV: feedback JSON, time, the value it adds
#: to the event's sum.
#: Returns 1 the event is active (record the feedback the normal way); 2 it is deferred: the
#: first reward is stashed in its hash (``fb``, ``fb_ts``) and, under ``sum`` (the deferred
#: hash's ``agg``), every reward is added to its ``sum``; forwarded at activation; 0 unknown or
#: expired.
DEFERRED_REWARD = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 1 end
if redis.call('EXISTS', KEYS[2]) == 1 then
  if redis.call('HSETNX', KEYS[2], 'fb', ARGV[1]) == 1 then
    redis.call('HSET', KEYS[2], 'fb_ts', ARGV[2])
  end
  if redis.call('HGET', KEYS[2], 'agg') == 'sum' then
    redis.call('HINCRBYFLOAT', KEYS[2], 'sum', ARGV[3])
  end
  return 2
end
return 0
"""

#: Replace a model's stored config only if it is still the one the caller read (compare and
#: set on its ``uid``; a concurrent delete, reset, import or renewal wins).
#: KEYS: the models hash.  ARGV: name, config JSON, expected current uid.
#: Returns 1 replaced, 0 no such model, -1 the stored model has another uid.
REPLACE_CONFIG = """
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 0 end
if cjson.decode(cur)['uid'] ~= ARGV[3] then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""
