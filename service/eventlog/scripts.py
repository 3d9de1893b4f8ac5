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
#: names, decisions stream length bound (0: none), age of the decision (s), then pairs
#: (feature name, "n"|"s") for the features the caller has not seen confirmed.
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
for i = 9, #ARGV, 2 do
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
redis.call('HSET', ev, 'sid', sid, 'deadline', tostring(deadline), 'd', ARGV[1], 'rq', ARGV[5])
redis.call('EXPIRE', ev, ARGV[3])
redis.call('ZADD', KEYS[3], deadline, ARGV[4])
redis.call('HINCRBY', KEYS[4], 'decisions', 1)
return {1, sid}
"""
)

#: Record the first feedback of a decision.
#: KEYS: event hash, feedback stream, stats.  ARGV: feedback JSON.
#: Returns {0} unknown or expired event; {1, late} a feedback was recorded before (this one is
#: dropped); {2, late} recorded now. ``late`` ("0"/"1"): after the deadline by Redis's clock,
#: or after the event was joined. Only an on-time feedback can be joined; a late one is kept
#: in the feedback stream for the record.
FEEDBACK = (
    """
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
if redis.call('HSETNX', KEYS[1], 'fb', ARGV[1]) == 0 then
  return {1, redis.call('HGET', KEYS[1], 'fb_late')}
end
"""
    + _NOW
    + """
local late = '0'
local deadline = tonumber(redis.call('HGET', KEYS[1], 'deadline'))
if now > deadline or redis.call('HEXISTS', KEYS[1], 'joined') == 1 then late = '1' end
local sid = redis.call('XADD', KEYS[2], '*', 'e', ARGV[1], 'late', late)
redis.call('HSET', KEYS[1], 'fb_sid', sid, 'fb_late', late)
redis.call('HINCRBY', KEYS[3], 'rewards', 1)
return {2, late}
"""
)

#: Append a joined event, once per decision, if the lease holder asks and the reward is right.
#: KEYS: event hash, waiting zset, joined stream, stats, lease.
#: ARGV: event id, joined JSON, reward, lease value held, expected source ("feedback" |
#: "default"), TTL (s) of the event's tombstone after the join.
#: Returns {-1} the caller does not hold the lease (nothing written); {0} the event expired;
#: {1, joined id} joined before; {3} the expected source is wrong (an on-time feedback exists
#: and "default" was asked, or the window is still open, or no on-time feedback for
#: "feedback"): read the event again; {2, joined id} appended now. After the join the decision
#: JSON is dropped from the event hash (the joined stream has it); the rest stays as a
#: tombstone so a repeated event id or feedback is still recognised.
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
local fb, late, deadline = unpack(redis.call('HMGET', KEYS[1], 'fb', 'fb_late', 'deadline'))
local on_time = fb and late == '0'
"""
    + _NOW
    + """
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
#: KEYS: snapshot hash, lease.  ARGV: lease value held, blob, serving copy, version, id of the
#: last joined event applied, time, model uid, mode ("held": by the lease holder; "initial":
#: the version-0 snapshot of a new model, written only if no snapshot is stored at all: a
#: deleted model's snapshot is deleted with it).
#: Returns {-1} not the lease holder (nothing written); {0, stored version} a newer snapshot
#: of the same model (or, "initial", any snapshot) is stored already; {1} written.
SNAPSHOT = """
local version, uid = unpack(redis.call('HMGET', KEYS[1], 'version', 'uid'))
if ARGV[8] == 'initial' then
  if uid then return {0, version} end
elseif redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return {-1}
end
if uid == ARGV[7] and tonumber(version) > tonumber(ARGV[4]) then return {0, version} end
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
#: KEYS: the event hash, the deferred event hash.  ARGV: feedback JSON, time.
#: Returns 1 the event is active (record the feedback the normal way); 2 it is deferred: the
#: first reward is stashed in its hash, forwarded at activation; 0 unknown or expired.
DEFERRED_REWARD = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 1 end
if redis.call('EXISTS', KEYS[2]) == 1 then
  if redis.call('HSETNX', KEYS[2], 'fb', ARGV[1]) == 1 then
    redis.call('HSET', KEYS[2], 'fb_ts', ARGV[2])
  end
  return 2
end
return 0
"""

#: Replace a model's stored config only if the model exists (a concurrent delete wins).
#: KEYS: the models hash.  ARGV: name, config JSON.  Returns 1 replaced, 0 no such model.
REPLACE_CONFIG = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""
