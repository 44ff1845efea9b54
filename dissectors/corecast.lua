-- Wireshark dissector for CoreCast PDUs (the paper's section 3.2; our layout,
-- docs/wire-corecast.md): payload PDUs (type 1) and header PDUs (type 2).
--
-- Where they travel, and how this file hooks in:
--   * raw IP, protocol 253 (RFC 3692 experimental): registered in "ip.proto"
--     (IPv4 and IPv6 share the table);
--   * UDP port 54341 (corecast.wire.constants.CORECAST_UDP_PORT): "udp.port",
--     plus a strict heuristic on "udp" for other ports;
--   * inside LISP: Wireshark's own `lisp-data` dissector (UDP 4341) shows the
--     outer LISP header and hands the inner IP packet to `ip`, whose protocol
--     number (253) or inner UDP port (54341) then reaches this dissector.
--     Nothing LISP-specific is needed here.
--
-- Vocabulary: fields are corecast.<scapy field name> of corecast/wire/layers.py
-- (CoreCastPayload / CoreCastHeader): version, type, hash_id, hash_len, flags,
-- seq, payload_len, reserved, hash, data, dport, eid_afi, eid, eid6.
-- Malformed PDUs (the cases corecast.wire.codec.decode_cc rejects) get expert
-- info in the Malformed group; every read is guarded by tvb:len().
--
-- Usage: tshark -X lua_script:dissectors/corecast.lua -r capture.pcap

local corecast = Proto("corecast", "CoreCast")

local TYPE_NAMES = { [1] = "payload", [2] = "header" }
local HASH_NAMES = { [1] = "SHA-1", [2] = "SHA-256" }
local HASH_LEN = { [1] = 20, [2] = 32 }
local AFI_NAMES = { [0] = "none", [1] = "IPv4", [2] = "IPv6", [16387] = "LCAF" }
local AFI_LEN = { [1] = 4, [2] = 16 }
local FIXED = 12  -- common part (8) + payload length/reserved or port/AFI (4)
local VERSION = 1

-- all fields in one table
local f = {
    version = ProtoField.uint8("corecast.version", "Version", base.DEC, nil, 0xF0),
    type = ProtoField.uint8("corecast.type", "Type", base.DEC, TYPE_NAMES, 0x0F),
    hash_id = ProtoField.uint8("corecast.hash_id", "Hash ID", base.DEC, HASH_NAMES),
    hash_len = ProtoField.uint8("corecast.hash_len", "Hash length", base.DEC),
    flags = ProtoField.uint8("corecast.flags", "Flags", base.HEX),
    seq = ProtoField.uint32("corecast.seq", "Sequence number", base.DEC),
    payload_len = ProtoField.uint16("corecast.payload_len", "Payload length", base.DEC),
    reserved = ProtoField.uint16("corecast.reserved", "Reserved", base.HEX),
    hash = ProtoField.bytes("corecast.hash", "Hash"),
    data = ProtoField.bytes("corecast.data", "Payload"),
    dport = ProtoField.uint16("corecast.dport", "Destination port (ETR)", base.DEC),
    eid_afi = ProtoField.uint16("corecast.eid_afi", "EID AFI", base.DEC, AFI_NAMES),
    eid = ProtoField.ipv4("corecast.eid", "Destination EID"),
    eid6 = ProtoField.ipv6("corecast.eid6", "Destination EID"),
    trailing = ProtoField.bytes("corecast.trailing", "Trailing bytes"),
}
corecast.fields = f

local e = {
    truncated = ProtoExpert.new("corecast.truncated", "Truncated CoreCast PDU",
                                expert.group.MALFORMED, expert.severity.ERROR),
    bad_version = ProtoExpert.new("corecast.bad_version", "Unknown CoreCast version",
                                  expert.group.MALFORMED, expert.severity.ERROR),
    bad_type = ProtoExpert.new("corecast.bad_type", "Unknown CoreCast PDU type",
                               expert.group.MALFORMED, expert.severity.ERROR),
    bad_hash_len = ProtoExpert.new("corecast.bad_hash_len",
                                   "Hash length does not match the hash ID",
                                   expert.group.MALFORMED, expert.severity.ERROR),
    bad_length = ProtoExpert.new("corecast.bad_length", "Length does not match the PDU",
                                 expert.group.MALFORMED, expert.severity.ERROR),
    bad_afi = ProtoExpert.new("corecast.bad_afi", "Unsupported EID AFI",
                              expert.group.MALFORMED, expert.severity.ERROR),
    unknown_hash = ProtoExpert.new("corecast.unknown_hash", "Unknown hash ID",
                                   expert.group.PROTOCOL, expert.severity.WARN),
    reserved = ProtoExpert.new("corecast.reserved_set", "Reserved field not zero",
                               expert.group.PROTOCOL, expert.severity.WARN),
}
corecast.experts = e

corecast.prefs.udp_port = Pref.uint("UDP port", 54341,
    "UDP port decoded as CoreCast (corecast.wire.constants.CORECAST_UDP_PORT)")
corecast.prefs.ip_proto = Pref.uint("IP protocol number", 253,
    "IP protocol decoded as CoreCast (corecast.wire.constants.IPPROTO_CORECAST)")

-- What the payload PDU carries: a dissector table keyed by PDU type (only type 1
-- has a payload), so Decode As can change it; by default RTP, since our source
-- cuts the stream into RTP packets (docs/wire-corecast.md, "The chunk").
local payload_table = DissectorTable.new("corecast.payload", "CoreCast payload",
                                         ftypes.UINT8, base.DEC, corecast)
local rtp = Dissector.get("rtp")
if rtp ~= nil then payload_table:add(1, rtp) end

local cur_port, cur_proto = nil, nil
local function register()
    local udp = DissectorTable.get("udp.port")
    local ip = DissectorTable.get("ip.proto")
    if cur_port then udp:remove(cur_port, corecast) end
    if cur_proto then ip:remove(cur_proto, corecast) end
    cur_port, cur_proto = corecast.prefs.udp_port, corecast.prefs.ip_proto
    if cur_port ~= 0 then udp:add(cur_port, corecast) end
    if cur_proto ~= 0 then ip:add(cur_proto, corecast) end
end

function corecast.prefs_changed()
    register()
end

-- Is this a well-formed PDU?  (the checks of corecast.wire.codec.decode_cc)
local function valid(tvb)
    local n = tvb:len()
    if n < FIXED then return false end
    local vt = tvb(0, 1):uint()
    local typ, hid, hlen = vt % 16, tvb(1, 1):uint(), tvb(2, 1):uint()
    if math.floor(vt / 16) ~= VERSION or hlen == 0 then return false end
    if HASH_LEN[hid] == nil or HASH_LEN[hid] ~= hlen then return false end
    if typ == 1 then return FIXED + hlen + tvb(8, 2):uint() == n end
    if typ == 2 then
        local el = AFI_LEN[tvb(10, 2):uint()]
        return el ~= nil and FIXED + hlen + el == n
    end
    return false
end

local function dissect(tvb, pinfo, tree)
    local n = tvb:len()
    pinfo.cols.protocol = "CoreCast"
    local t = tree:add(corecast, tvb())
    if n < 1 then
        t:add_proto_expert_info(e.truncated, "Empty CoreCast PDU")
        return n
    end
    local vt = tvb(0, 1):uint()
    local version, typ = math.floor(vt / 16), vt % 16
    local vi = t:add(f.version, tvb(0, 1))
    local ti = t:add(f.type, tvb(0, 1))
    if version ~= VERSION then
        vi:add_proto_expert_info(e.bad_version, "CoreCast version " .. version
                                 .. " (this dissector knows " .. VERSION .. ")")
    end
    local tname = TYPE_NAMES[typ]
    if tname == nil then
        ti:add_proto_expert_info(e.bad_type, "CoreCast PDU type " .. typ)
    end
    t:append_text(" " .. (tname or ("type " .. typ)) .. " PDU")
    pinfo.cols.info = "CoreCast " .. (tname or ("type " .. typ))
    if n < FIXED then
        t:add_proto_expert_info(e.truncated, "PDU of " .. n .. " bytes: the fixed part is "
                                .. FIXED)
        if n > 1 then t:add(f.trailing, tvb(1, n - 1)) end
        pinfo.cols.info:append(" [truncated]")
        return n
    end
    local hid, hlen = tvb(1, 1):uint(), tvb(2, 1):uint()
    local hi = t:add(f.hash_id, tvb(1, 1))
    local hli = t:add(f.hash_len, tvb(2, 1))
    if HASH_LEN[hid] == nil then
        hi:add_proto_expert_info(e.unknown_hash, "Hash ID " .. hid .. " is not known")
    elseif HASH_LEN[hid] ~= hlen then
        hli:add_proto_expert_info(e.bad_hash_len, HASH_NAMES[hid] .. " digests are "
                                  .. HASH_LEN[hid] .. " bytes, not " .. hlen)
    end
    if hlen == 0 then hli:add_proto_expert_info(e.bad_hash_len, "Empty hash") end
    t:add(f.flags, tvb(3, 1))
    local seq = tvb(4, 4):uint()
    t:add(f.seq, tvb(4, 4))
    pinfo.cols.info:append(" seq=" .. seq)
    if typ ~= 2 then  -- payload PDU layout (also used to show unknown types)
        local plen = tvb(8, 2):uint()
        t:add(f.payload_len, tvb(8, 2))
        local ri = t:add(f.reserved, tvb(10, 2))
        if tvb(10, 2):uint() ~= 0 then
            ri:add_proto_expert_info(e.reserved, "Reserved field is not zero")
        end
        local pos = FIXED
        local hl = math.min(hlen, n - pos)
        if hl > 0 then t:add(f.hash, tvb(pos, hl)) end
        if hl < hlen then
            t:add_proto_expert_info(e.truncated, "Hash truncated: " .. hl .. " of "
                                    .. hlen .. " bytes")
            return n
        end
        pos = pos + hlen
        local dl = math.min(plen, n - pos)
        if dl > 0 then t:add(f.data, tvb(pos, dl))
        else t:add(f.data, tvb(0, 0), "") end
        if typ == 1 then pinfo.cols.info:append(" len=" .. plen) end
        if typ == 1 and dl > 0 and dl == plen and pos + plen == n then
            -- a malformed payload makes the called dissector throw after marking
            -- the tree; keep that from surfacing as a Lua error.  Our columns stay.
            local info = tostring(pinfo.cols.info)
            pcall(function() payload_table:try(typ, tvb(pos, dl):tvb(), pinfo, tree) end)
            pinfo.cols.protocol = "CoreCast"
            pinfo.cols.info = info
        end
        if dl < plen then
            t:add_proto_expert_info(e.bad_length, "Payload length " .. plen .. " but "
                                    .. dl .. " bytes follow")
        elseif pos + plen < n then
            t:add(f.trailing, tvb(pos + plen, n - pos - plen))
            t:add_proto_expert_info(e.bad_length, (n - pos - plen)
                                    .. " bytes after the payload")
        end
        return n
    end
    -- header PDU
    t:add(f.dport, tvb(8, 2))
    local afi = tvb(10, 2):uint()
    local ai = t:add(f.eid_afi, tvb(10, 2))
    local pos = FIXED
    local hl = math.min(hlen, n - pos)
    if hl > 0 then t:add(f.hash, tvb(pos, hl)) end
    if hl < hlen then
        t:add_proto_expert_info(e.truncated, "Hash truncated: " .. hl .. " of " .. hlen
                                .. " bytes")
        return n
    end
    pos = pos + hlen
    local el = AFI_LEN[afi]
    if el == nil then
        ai:add_proto_expert_info(e.bad_afi, "EID AFI " .. afi .. " (1 = IPv4, 2 = IPv6)")
        if pos < n then t:add(f.trailing, tvb(pos, n - pos)) end
        return n
    end
    if pos + el > n then
        t:add_proto_expert_info(e.truncated, "Destination EID truncated")
        if pos < n then t:add(f.trailing, tvb(pos, n - pos)) end
        return n
    end
    local eid
    if el == 4 then
        t:add(f.eid, tvb(pos, 4))
        eid = tostring(tvb(pos, 4):ipv4())
    else
        t:add(f.eid6, tvb(pos, 16))
        eid = "[" .. tostring(tvb(pos, 16):ipv6()) .. "]"
    end
    pinfo.cols.info:append(" -> " .. eid .. ":" .. tvb(8, 2):uint())
    if pos + el < n then
        t:add(f.trailing, tvb(pos + el, n - pos - el))
        t:add_proto_expert_info(e.bad_length, (n - pos - el) .. " bytes after the EID")
    end
    return n
end

function corecast.dissector(tvb, pinfo, tree)
    return dissect(tvb, pinfo, tree)
end

-- Strict heuristic for CoreCast over UDP on other ports: version 1, a known
-- type and hash, and lengths that account for every byte.
local function heuristic(tvb, pinfo, tree)
    if not valid(tvb) then return false end
    pinfo.conversation = corecast
    dissect(tvb, pinfo, tree)
    return true
end

corecast:register_heuristic("udp", heuristic)
DissectorTable.get("udp.port"):add_for_decode_as(corecast)  -- Analyze > Decode As
register()
