-- Argo CD health of an ExternalSecretsManager (operator.openshift.io), from the entries the
-- operator writes per controller (docs/operations.md, "ExternalSecretsManager"). Argo CD sets
-- `obj` and runs this without the string library (plain Lua 5.1). Use and tests:
-- docs/gitops.md.

local MANAGER = "external-secrets-manager"          -- the ESM's own entry
local CONFIG = "external-secrets-controller"        -- mirrors the ExternalSecretsConfig

local function find(list, key, value)
  for _, item in ipairs(list or {}) do
    if item[key] == value then
      return item
    end
  end
  return nil
end

local function said(condition)
  local reason = condition.reason or ""
  local message = condition.message or ""
  if reason ~= "" and message ~= "" then
    return reason .. ": " .. message
  end
  return reason .. message
end

-- The first entry whose condition `kind` is True, and that condition.
local function first_true(entries, kind)
  for _, entry in ipairs(entries) do
    local condition = find(entry.conditions, "type", kind)
    if condition ~= nil and condition.status == "True" then
      return entry, condition
    end
  end
  return nil, nil
end

local function health(obj)
  local status = obj.status or {}
  local entries = status.controllerStatuses or {}
  local manager = find(entries, "name", MANAGER)
  if manager == nil then
    return "Progressing", "waiting for the operator to report status"
  end
  local generation = tonumber((obj.metadata or {}).generation)
  local observed = tonumber(manager.observedGeneration)
  if generation ~= nil and observed ~= nil and observed < generation then
    return "Progressing", "the status is for generation " .. observed .. " and the spec is at "
      .. generation .. ": the operator has not reconciled the latest spec yet"
  end
  local entry, condition = first_true(entries, "Degraded")
  if entry ~= nil then
    return "Degraded", entry.name .. ": " .. said(condition)
  end
  entry, condition = first_true(entries, "Progressing")
  if entry ~= nil then
    return "Progressing", entry.name .. ": " .. said(condition)
  end
  -- Nothing is wrong and nothing is under way. Without an ExternalSecretsConfig (or with one
  -- Unmanaged or Removed) the ESM is still healthy: waiting for one here would hold a sync
  -- wave that creates the ESM before the ESC for ever. The message says so.
  local message = "controllers Ready: " .. (status.controllersReady or "?")
  local config = find(entries, "name", CONFIG)
  local ready = config and find(config.conditions, "type", "Ready")
  if ready ~= nil and ready.status ~= "True" then
    message = message .. "; " .. CONFIG .. ": " .. said(ready)
  end
  return "Healthy", message
end

local hs = {}
hs.status, hs.message = health(obj)
return hs
