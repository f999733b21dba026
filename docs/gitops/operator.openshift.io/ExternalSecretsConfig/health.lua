-- Argo CD health of an ExternalSecretsConfig (operator.openshift.io), from the conditions the
-- operator writes (docs/operations.md, "Status"). Argo CD sets `obj` and runs this without
-- the string library (plain Lua 5.1): only comparisons, `..` and base functions below.
-- Use and tests: docs/gitops.md.

local function find(conditions, kind)
  for _, condition in ipairs(conditions) do
    if condition.type == kind then
      return condition
    end
  end
  return nil
end

-- "Reason: message", or whichever of the two is there.
local function said(condition)
  local reason = condition.reason or ""
  local message = condition.message or ""
  if reason ~= "" and message ~= "" then
    return reason .. ": " .. message
  end
  return reason .. message
end

-- The generation of the first condition written for an older spec than the object's, if any.
-- Only the three conditions health is made of: Upgradeable (the upgrade gate) is no health.
local function stale(conditions, generation)
  if generation == nil then
    return nil
  end
  for _, condition in ipairs(conditions) do
    local kind = condition.type
    if kind == "Ready" or kind == "Degraded" or kind == "Progressing" then
      local observed = tonumber(condition.observedGeneration)
      if observed ~= nil and observed < generation then
        return observed
      end
    end
  end
  return nil
end

local function health(obj)
  local conditions = {}
  if obj.status ~= nil and obj.status.conditions ~= nil then
    conditions = obj.status.conditions
  end
  local ready = find(conditions, "Ready")
  if ready == nil then
    return "Progressing", "waiting for the operator to report status"
  end
  local generation = tonumber((obj.metadata or {}).generation)
  local observed = stale(conditions, generation)
  if observed ~= nil then
    -- Whatever it says is about a spec that is no longer there.
    return "Progressing", "the status is for generation " .. observed .. " and the spec is at "
      .. generation .. ": the operator has not reconciled the latest spec yet"
  end
  local degraded = find(conditions, "Degraded")
  if degraded ~= nil and degraded.status == "True" then
    return "Degraded", said(degraded)
  end
  if ready.status == "True" then
    return "Healthy", said(ready)
  end
  local progressing = find(conditions, "Progressing")
  if progressing ~= nil and progressing.status == "True" then
    return "Progressing", said(progressing)
  end
  if ready.reason == "Unmanaged" or ready.reason == "Removed" then
    -- managementState: the administrator stopped the operator on purpose.
    return "Suspended", said(ready)
  end
  return "Progressing", said(ready)
end

local hs = {}
hs.status, hs.message = health(obj)
return hs
