-- Wireshark dissector for PPSPP, the Peer-to-Peer Streaming Peer Protocol
-- (RFC 7574), over UDP (section 8).  Wireshark has none of its own.
--
-- Vocabulary: every field is named ppspp.<scapy field name> of swift/wire/layers.py
-- (channel, messages, type, start, end, timestamp, chunk, delay, hash, signature,
-- ip, port, cert_len, cert, options, code, length, value), so the scapy layers,
-- this dissector and the tests share one set of names.  A few generated fields
-- (not on the wire) add what Wireshark users want to see: ppspp.first_chunk /
-- ppspp.last_chunk (a bin as a chunk range, section 4.2), ppspp.addressing and
-- ppspp.context_frame (which handshake set the chunk addressing in use),
-- ppspp.supported_type (the supported-messages bitmap expanded, 7.10).
--
-- Message sizes depend on the handshake (section 7): chunk addressing (7.8),
-- hash function (7.6), signature algorithm (7.7) and chunk size (7.11).  What a
-- HANDSHAKE announces is remembered per conversation (UDP endpoint pair) and used
-- for later datagrams; before any handshake the preferences apply (RFC defaults:
-- 32-bit chunk ranges, SHA-256, 1024-byte chunks).
--
-- Malformed input (truncated messages, bad lengths, unknown message types or
-- options) gives expert info and stops the parse as the RFC asks (section 3:
-- "the remaining messages MUST be discarded"); every read is guarded by tvb:len().
--
-- Usage: tshark -X lua_script:dissectors/ppspp.lua -r capture.pcap

local ppspp = Proto("ppspp", "Peer-to-Peer Streaming Peer Protocol (RFC 7574)")

-- ---------------------------------------------------------------------------
-- value strings (swift/wire/constants.py)

local MSG_NAMES = {
    [0] = "HANDSHAKE", [1] = "DATA", [2] = "ACK", [3] = "HAVE", [4] = "INTEGRITY",
    [5] = "PEX_RESv4", [6] = "PEX_REQ", [7] = "SIGNED_INTEGRITY", [8] = "REQUEST",
    [9] = "CANCEL", [10] = "CHOKE", [11] = "UNCHOKE", [12] = "PEX_RESv6",
    [13] = "PEX_REScert",
}
local MSG_SECTION = {
    [0] = "8.4", [1] = "8.6", [2] = "8.7", [3] = "8.5", [4] = "8.8", [5] = "8.13",
    [6] = "8.13", [7] = "8.9", [8] = "8.10", [9] = "8.11", [10] = "8.12",
    [11] = "8.12", [12] = "8.13", [13] = "8.13",
}
local OPT_NAMES = {
    [0] = "Version", [1] = "Minimum Version", [2] = "Swarm Identifier",
    [3] = "Content Integrity Protection Method", [4] = "Merkle Hash Tree Function",
    [5] = "Live Signature Algorithm", [6] = "Chunk Addressing Method",
    [7] = "Live Discard Window", [8] = "Supported Messages", [9] = "Chunk Size",
    [255] = "End Option",
}
local OPT_SECTION = {
    [0] = "7.2", [1] = "7.3", [2] = "7.4", [3] = "7.5", [4] = "7.6", [5] = "7.7",
    [6] = "7.8", [7] = "7.9", [8] = "7.10", [9] = "7.11", [255] = "7.1",
}
local CAM_NAMES = {
    [0] = "32-bit bins", [1] = "64-bit byte ranges", [2] = "32-bit chunk ranges",
    [3] = "64-bit bins", [4] = "64-bit chunk ranges",
}
local HASH_NAMES = { [0] = "SHA-1", [1] = "SHA-224", [2] = "SHA-256", [3] = "SHA-384",
                     [4] = "SHA-512" }
local HASH_SIZES = { [0] = 20, [1] = 28, [2] = 32, [3] = 48, [4] = 64 }
local SIG_NAMES = { [5] = "RSASHA1", [8] = "RSASHA256", [13] = "ECDSAP256SHA256",
                    [14] = "ECDSAP384SHA384" }
local SIG_SIZES = { [13] = 64, [14] = 96 }
local INTEGRITY_NAMES = { [0] = "No integrity protection", [1] = "Merkle Hash Tree",
                          [2] = "Sign All", [3] = "Unified Merkle Tree" }
local SPEC_SIZES = { [0] = 4, [1] = 16, [2] = 8, [3] = 8, [4] = 16 }

local VARIABLE_CHUNK_SIZE = 0xFFFFFFFF
local NONE32 = 0xFFFFFFFF

-- ---------------------------------------------------------------------------
-- fields: all in one table

local f = {
    channel = ProtoField.uint32("ppspp.channel", "Channel ID", base.HEX),
    messages = ProtoField.none("ppspp.messages", "Message"),
    type = ProtoField.uint8("ppspp.type", "Message type", base.DEC, MSG_NAMES),
    start = ProtoField.uint64("ppspp.start", "Start", base.DEC),
    ["end"] = ProtoField.uint64("ppspp.end", "End", base.DEC),
    timestamp = ProtoField.uint64("ppspp.timestamp", "Timestamp", base.DEC),
    chunk = ProtoField.bytes("ppspp.chunk", "Chunk"),
    delay = ProtoField.uint64("ppspp.delay", "One-way delay sample (us)", base.DEC),
    hash = ProtoField.bytes("ppspp.hash", "Hash"),
    signature = ProtoField.bytes("ppspp.signature", "Signature"),
    ip4 = ProtoField.ipv4("ppspp.ip", "Peer IPv4 address"),
    ip6 = ProtoField.ipv6("ppspp.ip", "Peer IPv6 address"),
    port = ProtoField.uint16("ppspp.port", "Peer UDP port", base.DEC),
    cert_len = ProtoField.uint16("ppspp.cert_len", "Certificate length", base.DEC),
    cert = ProtoField.bytes("ppspp.cert", "Membership certificate"),
    options = ProtoField.none("ppspp.options", "Protocol option"),
    code = ProtoField.uint8("ppspp.code", "Option code", base.DEC, OPT_NAMES),
    length = ProtoField.uint16("ppspp.length", "Option length", base.DEC),
    value = ProtoField.uint64("ppspp.value", "Option value", base.DEC),
    value_bytes = ProtoField.bytes("ppspp.value", "Option value"),
    -- generated (not on the wire)
    first_chunk = ProtoField.uint64("ppspp.first_chunk", "First chunk", base.DEC),
    last_chunk = ProtoField.uint64("ppspp.last_chunk", "Last chunk", base.DEC),
    addressing = ProtoField.uint8("ppspp.addressing", "Chunk addressing in use", base.DEC,
                                  CAM_NAMES),
    context_frame = ProtoField.framenum("ppspp.context_frame", "Handshake that set it"),
    supported_type = ProtoField.uint8("ppspp.supported_type", "Supported message type",
                                      base.DEC, MSG_NAMES),
    undecoded = ProtoField.bytes("ppspp.undecoded", "Discarded bytes"),
    -- typed aliases for display filters: scapy's vocabulary gives ppspp.value and
    -- ppspp.ip two types each, and Wireshark 4.0 filters only one type per name.
    -- Named after swift.wire.codec.HandshakeOptions and PexResV4/V6.
    opt_version = ProtoField.uint8("ppspp.opt.version", "Version"),
    opt_min_version = ProtoField.uint8("ppspp.opt.min_version", "Minimum version"),
    opt_swarm_id = ProtoField.bytes("ppspp.opt.swarm_id", "Swarm identifier"),
    opt_integrity = ProtoField.uint8("ppspp.opt.integrity", "Content integrity method",
                                     base.DEC, INTEGRITY_NAMES),
    opt_hash_func = ProtoField.uint8("ppspp.opt.hash_func", "Merkle hash function", base.DEC,
                                     HASH_NAMES),
    opt_sig_alg = ProtoField.uint8("ppspp.opt.sig_alg", "Live signature algorithm", base.DEC,
                                   SIG_NAMES),
    opt_addressing = ProtoField.uint8("ppspp.opt.addressing", "Chunk addressing method",
                                      base.DEC, CAM_NAMES),
    opt_discard_window = ProtoField.uint64("ppspp.opt.discard_window", "Live discard window"),
    opt_supported = ProtoField.bytes("ppspp.opt.supported", "Supported messages bitmap"),
    opt_chunk_size = ProtoField.uint32("ppspp.opt.chunk_size", "Chunk size"),
    ipv4 = ProtoField.ipv4("ppspp.ipv4", "Peer IPv4 address"),
    ipv6 = ProtoField.ipv6("ppspp.ipv6", "Peer IPv6 address"),
}
local OPT_ALIAS = { [0] = f.opt_version, [1] = f.opt_min_version, [2] = f.opt_swarm_id,
                    [3] = f.opt_integrity, [4] = f.opt_hash_func, [5] = f.opt_sig_alg,
                    [6] = f.opt_addressing, [7] = f.opt_discard_window,
                    [8] = f.opt_supported, [9] = f.opt_chunk_size }

-- the typed alias of an option value (generated, for display filters)
local function alias(ot, code, range, value)
    if ot ~= nil and OPT_ALIAS[code] ~= nil then
        if value ~= nil then ot:add(OPT_ALIAS[code], range, value):set_generated()
        else ot:add(OPT_ALIAS[code], range):set_generated() end
    end
end
ppspp.fields = f

local e = {
    truncated = ProtoExpert.new("ppspp.truncated", "Truncated message",
                                expert.group.MALFORMED, expert.severity.ERROR),
    unknown_type = ProtoExpert.new("ppspp.unknown_type", "Unknown message type",
                                   expert.group.MALFORMED, expert.severity.ERROR),
    bad_option = ProtoExpert.new("ppspp.bad_option", "Malformed protocol options",
                                 expert.group.MALFORMED, expert.severity.ERROR),
    bad_length = ProtoExpert.new("ppspp.bad_length", "Length does not match the data",
                                 expert.group.MALFORMED, expert.severity.ERROR),
    short = ProtoExpert.new("ppspp.short", "Datagram shorter than a channel ID",
                            expert.group.MALFORMED, expert.severity.ERROR),
    out_of_spec = ProtoExpert.new("ppspp.out_of_spec", "Value outside RFC 7574",
                                  expert.group.PROTOCOL, expert.severity.WARN),
    keepalive = ProtoExpert.new("ppspp.keepalive", "Keep-alive (8.14)",
                                expert.group.SEQUENCE, expert.severity.CHAT),
    close = ProtoExpert.new("ppspp.close", "Channel close (8.4)",
                            expert.group.SEQUENCE, expert.severity.NOTE),
}
ppspp.experts = e

-- ---------------------------------------------------------------------------
-- preferences

-- enum names are swift.wire.constants.ChunkAddressing / HashFunc member names,
-- so `-o ppspp.addressing:BIN64 -o ppspp.hash_func:SHA1` reads like the Python side
local CAM_KEYS = { [0] = "BIN32", [1] = "BYTE64", [2] = "CHUNK32", [3] = "BIN64",
                   [4] = "CHUNK64" }
local HASH_KEYS = { [0] = "SHA1", [1] = "SHA224", [2] = "SHA256", [3] = "SHA384",
                    [4] = "SHA512" }
local cam_enum = {}
for i = 0, 4 do cam_enum[#cam_enum + 1] = { i + 1, CAM_KEYS[i], i } end
local hash_enum = {}
for i = 0, 4 do hash_enum[#hash_enum + 1] = { i + 1, HASH_KEYS[i], i } end

ppspp.prefs.udp_port = Pref.uint("UDP port", 6778,
    "UDP port decoded as PPSPP (swift.wire.layers.PPSPP_PORT)")
ppspp.prefs.addressing = Pref.enum("Default chunk addressing", 2,
    "Used until a HANDSHAKE announces the method (RFC default: 32-bit chunk ranges)",
    cam_enum, false)
ppspp.prefs.hash_func = Pref.enum("Default Merkle hash function", 2,
    "Sets the INTEGRITY hash size until a HANDSHAKE announces it", hash_enum, false)
ppspp.prefs.sig_size = Pref.uint("Default signature size", 64,
    "SIGNED_INTEGRITY signature bytes when the algorithm does not fix it")
ppspp.prefs.chunk_size = Pref.uint("Default chunk size", 1024,
    "DATA chunk bytes until a HANDSHAKE announces it (4294967295 = variable)")

local current_port = nil
local function register_port()
    local t = DissectorTable.get("udp.port")
    if current_port then t:remove(current_port, ppspp) end
    current_port = ppspp.prefs.udp_port
    if current_port ~= 0 then t:add(current_port, ppspp) end
end

-- ---------------------------------------------------------------------------
-- per-conversation and per-frame state

local conv_state = {}   -- conversation key -> context
local frame_ctx = {}    -- frame number -> context at the start of that datagram

function ppspp.init()
    conv_state = {}
    frame_ctx = {}
end

function ppspp.prefs_changed()
    register_port()
end

local function default_ctx()
    return {
        cam = ppspp.prefs.addressing,
        hash_size = HASH_SIZES[ppspp.prefs.hash_func] or 32,
        sig_size = ppspp.prefs.sig_size,
        chunk_size = ppspp.prefs.chunk_size,
        frame = nil,
    }
end

local function copy_ctx(c)
    return { cam = c.cam, hash_size = c.hash_size, sig_size = c.sig_size,
             chunk_size = c.chunk_size, frame = c.frame }
end

local function conv_key(pinfo)
    local a = tostring(pinfo.src) .. "/" .. tostring(pinfo.src_port)
    local b = tostring(pinfo.dst) .. "/" .. tostring(pinfo.dst_port)
    if a < b then return a .. "|" .. b end
    return b .. "|" .. a
end

-- ---------------------------------------------------------------------------
-- helpers

-- Adds only when a tree is given (the heuristic parses without one).
local function add(t, field, range, value)
    if t == nil then return nil end
    if value ~= nil then return t:add(field, range, value) end
    return t:add(field, range)
end

local function expert(t, ex, text)
    if t ~= nil then t:add_proto_expert_info(ex, text) end
end

-- Bin number (section 4.2) -> first chunk, last chunk, layer.  ``wide`` selects
-- UInt64 arithmetic; 32-bit values stay Lua numbers.
local function bin_range(b, wide)
    if wide then
        local one = UInt64(1)
        local lay = 0
        local x = b
        while lay < 64 and x:band(one) == one do
            lay = lay + 1
            x = x:rshift(1)
        end
        if lay >= 64 then return nil end
        local first = UInt64(0)  -- layer 63: the whole 64-bit space (no 64-bit shift)
        if lay < 63 then first = b:rshift(lay + 1):lshift(lay) end
        return first, first + one:lshift(lay) - one, lay
    end
    local lay = 0
    local x = b
    while lay < 32 and x % 2 == 1 do
        lay = lay + 1
        x = (x - 1) / 2
    end
    if lay >= 32 then return nil end
    local first = math.floor(b / 2 ^ (lay + 1)) * 2 ^ lay
    return first, first + 2 ^ lay - 1, lay
end

-- ---------------------------------------------------------------------------
-- handshake options (section 7); returns new position or nil, and updates ``ctx``

local function parse_options(tvb, pos, t, ctx, pinfo)
    local n = tvb:len()
    local last = -1
    local cam = nil
    while true do
        if pos >= n then
            expert(t, e.bad_option, "HANDSHAKE without end option (7.1)")
            return nil
        end
        local code = tvb(pos, 1):uint()
        local name = OPT_NAMES[code] or ("Unknown option " .. code)
        local ot = nil
        if t then
            ot = t:add(f.options, tvb(pos, 1))
            ot:set_text(name .. " (" .. (OPT_SECTION[code] or "?") .. ")")
            ot:add(f.code, tvb(pos, 1))
        end
        if code == 255 then
            if ot then ot:set_len(1) end
            return pos + 1
        end
        if code <= last then
            expert(ot, e.bad_option, "Options not sorted by code or repeated (7)")
            return nil
        end
        last = code
        local start = pos
        pos = pos + 1
        if code <= 1 or (code >= 3 and code <= 6) then
            if pos + 1 > n then
                expert(ot, e.truncated, "Truncated option " .. name)
                return nil
            end
            local v = tvb(pos, 1):uint()
            local vi = add(ot, f.value, tvb(pos, 1))
            alias(ot, code, tvb(pos, 1))
            if code == 0 or code == 1 then
                if vi and v ~= 1 then vi:add_proto_expert_info(e.out_of_spec,
                    "Only version 1 is defined (7.2)") end
                if ot then ot:append_text(": " .. v) end
            elseif code == 3 then
                if vi and INTEGRITY_NAMES[v] == nil then vi:add_proto_expert_info(
                    e.out_of_spec, "Unassigned integrity protection method (7.5)") end
                if ot then ot:append_text(": " .. (INTEGRITY_NAMES[v] or v)) end
            elseif code == 4 then
                if HASH_SIZES[v] then ctx.hash_size = HASH_SIZES[v]
                elseif vi then vi:add_proto_expert_info(e.out_of_spec,
                    "Unassigned Merkle hash function (7.6)") end
                if ot then ot:append_text(": " .. (HASH_NAMES[v] or v)) end
            elseif code == 5 then
                ctx.sig_size = SIG_SIZES[v] or ppspp.prefs.sig_size
                if ot then ot:append_text(": " .. (SIG_NAMES[v] or v)) end
            elseif code == 6 then
                cam = v
                if CAM_NAMES[v] then ctx.cam = v
                elseif vi then vi:add_proto_expert_info(e.out_of_spec,
                    "Unassigned chunk addressing method (7.8)") end
                if ot then ot:append_text(": " .. (CAM_NAMES[v] or v)) end
            end
            pos = pos + 1
        elseif code == 2 then
            if pos + 2 > n then
                expert(ot, e.truncated, "Truncated swarm identifier length")
                return nil
            end
            local ln = tvb(pos, 2):uint()
            add(ot, f.length, tvb(pos, 2))
            pos = pos + 2
            if pos + ln > n then
                expert(ot, e.bad_length, "Swarm identifier length " .. ln
                       .. " exceeds the datagram")
                return nil
            end
            if ln > 0 then
                add(ot, f.value_bytes, tvb(pos, ln))
                alias(ot, code, tvb(pos, ln))
            elseif ot then
                ot:add(f.value_bytes, tvb(pos - 2, 0), "")
                alias(ot, code, tvb(pos - 2, 0), "")
            end
            if ot and ln > 0 then ot:append_text(": " .. tvb(pos, ln):bytes():tohex()) end
            pos = pos + ln
        elseif code == 7 then
            local a = cam
            if a == nil then a = ctx.cam end
            local w = 4
            if a == 1 or a == 3 or a == 4 then w = 8 end
            if pos + w > n then
                expert(ot, e.truncated, "Truncated live discard window")
                return nil
            end
            add(ot, f.value, tvb(pos, w))
            alias(ot, code, tvb(pos, w))
            if ot then
                local v = w == 8 and tvb(pos, 8):uint64() or tvb(pos, 4):uint()
                local txt = tostring(v)
                if (w == 4 and v == NONE32) or (w == 8 and v == UInt64.max()) then
                    txt = "does not discard"
                end
                ot:append_text(": " .. txt)
            end
            pos = pos + w
        elseif code == 8 then
            if pos + 1 > n then
                expert(ot, e.truncated, "Truncated supported messages length")
                return nil
            end
            local ln = tvb(pos, 1):uint()
            add(ot, f.length, tvb(pos, 1))
            pos = pos + 1
            if ln > 32 or pos + ln > n then
                expert(ot, e.bad_length, "Supported messages bitmap length " .. ln
                       .. (ln > 32 and " exceeds 32 bytes" or " exceeds the datagram"))
                return nil
            end
            if ln > 0 then
                local vi = add(ot, f.value_bytes, tvb(pos, ln))
                alias(ot, code, tvb(pos, ln))
                if vi then
                    local names = {}
                    for i = 0, ln - 1 do
                        local byte = tvb(pos + i, 1):uint()
                        for j = 0, 7 do
                            if bit32.band(byte, bit32.rshift(0x80, j)) ~= 0 then
                                local mt = i * 8 + j
                                local it = vi:add(f.supported_type, tvb(pos + i, 1), mt)
                                it:set_generated()
                                names[#names + 1] = MSG_NAMES[mt] or tostring(mt)
                            end
                        end
                    end
                    ot:append_text(": " .. table.concat(names, ", "))
                end
            elseif ot then
                ot:add(f.value_bytes, tvb(pos - 1, 0), "")
                alias(ot, code, tvb(pos - 1, 0), "")
            end
            pos = pos + ln
        elseif code == 9 then
            if pos + 4 > n then
                expert(ot, e.truncated, "Truncated chunk size")
                return nil
            end
            local v = tvb(pos, 4):uint()
            local vi = add(ot, f.value, tvb(pos, 4))
            alias(ot, code, tvb(pos, 4))
            if v == 0 then
                if vi then vi:add_proto_expert_info(e.out_of_spec, "Chunk size 0 (7.11)") end
            else
                ctx.chunk_size = v
            end
            if ot then
                ot:append_text(": " .. (v == VARIABLE_CHUNK_SIZE and "variable" or v))
            end
            pos = pos + 4
        else
            expert(ot, e.bad_option, "Unknown option code " .. code .. " (7)")
            return nil
        end
        if ot then ot:set_len(pos - start) end
    end
end

-- ---------------------------------------------------------------------------
-- one datagram: channel ID + messages (sections 8.2, 8.3).  With ``t`` nil it
-- only validates (heuristic).  Returns ok (every byte parsed), message names.

local function parse_datagram(tvb, pinfo, t, ctx)
    local n = tvb:len()
    local names = {}
    add(t, f.channel, tvb(0, 4))
    if n == 4 then
        expert(t, e.keepalive, "Keep-alive: channel ID only (8.14)")
        return true, names
    end
    local pos = 4
    while pos < n do
        local mtype = tvb(pos, 1):uint()
        local mname = MSG_NAMES[mtype]
        local mt = nil
        if t then
            mt = t:add(f.messages, tvb(pos, 1))
            mt:set_text((mname or ("Unknown type " .. mtype)) .. " ("
                        .. (MSG_SECTION[mtype] or "?") .. ")")
            mt:add(f.type, tvb(pos, 1))
        end
        if mname == nil then
            expert(mt, e.unknown_type, "Unknown message type " .. mtype
                   .. ": the rest of the datagram is discarded (3)")
            add(t, f.undecoded, tvb(pos, n - pos))
            return false, names
        end
        names[#names + 1] = mname
        local p = pos + 1
        local cam = ctx.cam
        local spec = SPEC_SIZES[cam]
        local wide = cam == 1 or cam == 3 or cam == 4
        local isbin = cam == 0 or cam == 3
        local function trunc(what)
            expert(mt, e.truncated, "Truncated " .. mname .. " " .. what)
            if t and pos < n then t:add(f.undecoded, tvb(pos, n - pos)) end
            return false, names
        end
        if (mtype >= 1 and mtype <= 4) or (mtype >= 7 and mtype <= 9) then
            if p + spec > n then return trunc("chunk specification") end
            local s, en
            if isbin then
                s = wide and tvb(p, 8):uint64() or tvb(p, 4):uint()
                add(mt, f.start, tvb(p, spec))
                if mt then
                    if (not wide and s == NONE32) or (wide and s == UInt64.max()) then
                        mt:append_text(": empty (bin all ones)")
                    else
                        local fc, lc, lay = bin_range(s, wide)
                        if fc ~= nil then
                            local w = wide and 8 or 4
                            mt:add(f.first_chunk, tvb(p, w), wide and fc or UInt64(fc))
                              :set_generated()
                            mt:add(f.last_chunk, tvb(p, w), wide and lc or UInt64(lc))
                              :set_generated()
                            mt:append_text(": bin " .. tostring(s) .. " = chunks "
                                           .. tostring(fc) .. ".." .. tostring(lc))
                        end
                    end
                end
            else
                local w = spec / 2
                s = wide and tvb(p, 8):uint64() or tvb(p, 4):uint()
                en = wide and tvb(p + w, 8):uint64() or tvb(p + w, 4):uint()
                add(mt, f.start, tvb(p, w))
                add(mt, f["end"], tvb(p + w, w))
                if mt then
                    mt:append_text(": " .. (cam == 1 and "bytes " or "chunks ")
                                   .. tostring(s) .. ".." .. tostring(en))
                end
            end
            p = p + spec
            if mtype == 1 then
                if p + 8 > n then return trunc("timestamp") end
                add(mt, f.timestamp, tvb(p, 8))
                p = p + 8
                local rem = n - p
                local ln
                if cam == 1 then
                    -- byte range: the range gives the length (UInt64 arithmetic)
                    local diff = en - s
                    if en < s or diff >= UInt64(rem) then
                        expert(mt, e.bad_length, "DATA byte range " .. tostring(s) .. ".."
                               .. tostring(en) .. " does not match the " .. rem
                               .. " payload bytes")
                        if t and p < n then t:add(f.undecoded, tvb(p, rem)) end
                        return false, names
                    end
                    ln = diff:tonumber() + 1
                elseif ctx.chunk_size == VARIABLE_CHUNK_SIZE or rem < ctx.chunk_size then
                    ln = rem
                else
                    ln = ctx.chunk_size
                end
                if ln > 0 then add(mt, f.chunk, tvb(p, ln))
                elseif mt then mt:add(f.chunk, tvb(p - 8, 0), "") end
                if mt then mt:append_text(", " .. ln .. " bytes") end
                p = p + ln
            elseif mtype == 2 then
                if p + 8 > n then return trunc("delay") end
                add(mt, f.delay, tvb(p, 8))
                p = p + 8
            elseif mtype == 4 then
                if p + ctx.hash_size > n then return trunc("hash") end
                add(mt, f.hash, tvb(p, ctx.hash_size))
                p = p + ctx.hash_size
            elseif mtype == 7 then
                if p + 8 + ctx.sig_size > n then return trunc("timestamp and signature") end
                add(mt, f.timestamp, tvb(p, 8))
                add(mt, f.signature, tvb(p + 8, ctx.sig_size))
                p = p + 8 + ctx.sig_size
            end
        elseif mtype == 0 then
            if p + 4 > n then return trunc("source channel") end
            local src = tvb(p, 4):uint()
            add(mt, f.channel, tvb(p, 4))
            local newctx = copy_ctx(ctx)
            local p2 = parse_options(tvb, p + 4, mt, newctx, pinfo)
            if p2 == nil then
                if t and p + 4 < n then t:add(f.undecoded, tvb(pos, n - pos)) end
                return false, names
            end
            if src == 0 then
                expert(mt, e.close, "Closing handshake: source channel 0 (8.4)")
            else
                newctx.frame = pinfo.number
                -- the announced method applies from here on (e.g. a HAVE after it)
                ctx.cam, ctx.hash_size, ctx.sig_size, ctx.chunk_size, ctx.frame =
                    newctx.cam, newctx.hash_size, newctx.sig_size, newctx.chunk_size,
                    newctx.frame
                ctx.announced = true
            end
            if mt then mt:append_text(": source channel " .. string.format("0x%08x", src)) end
            p = p2
        elseif mtype == 5 then
            if p + 6 > n then return trunc("address") end
            local ii = add(mt, f.ip4, tvb(p, 4))
            if ii then ii:add(f.ipv4, tvb(p, 4)):set_generated() end
            add(mt, f.port, tvb(p + 4, 2))
            if mt then mt:append_text(": " .. tostring(tvb(p, 4):ipv4()) .. ":"
                                      .. tvb(p + 4, 2):uint()) end
            p = p + 6
        elseif mtype == 12 then
            if p + 18 > n then return trunc("address") end
            local ii = add(mt, f.ip6, tvb(p, 16))
            if ii then ii:add(f.ipv6, tvb(p, 16)):set_generated() end
            add(mt, f.port, tvb(p + 16, 2))
            p = p + 18
        elseif mtype == 13 then
            if p + 2 > n then return trunc("certificate length") end
            local ln = tvb(p, 2):uint()
            add(mt, f.cert_len, tvb(p, 2))
            if p + 2 + ln > n then
                expert(mt, e.bad_length, "Certificate length " .. ln .. " exceeds the datagram")
                if t then t:add(f.undecoded, tvb(pos, n - pos)) end
                return false, names
            end
            if ln > 0 then add(mt, f.cert, tvb(p + 2, ln))
            elseif mt then mt:add(f.cert, tvb(p, 0), "") end
            p = p + 2 + ln
        end
        -- CHOKE, UNCHOKE, PEX_REQ: type octet only
        if mt then mt:set_len(p - pos) end
        pos = p
    end
    return true, names
end

-- ---------------------------------------------------------------------------
-- entry points

local function dissect(tvb, pinfo, tree)
    local n = tvb:len()
    pinfo.cols.protocol = "PPSPP"
    local t = tree:add(ppspp, tvb())
    if n < 4 then
        t:add_proto_expert_info(e.short, "Datagram of " .. n .. " bytes: no channel ID (8.3)")
        pinfo.cols.info = "PPSPP malformed"
        return n
    end
    local key = conv_key(pinfo)
    local ctx
    if pinfo.visited and frame_ctx[pinfo.number] then
        ctx = copy_ctx(frame_ctx[pinfo.number])
    else
        ctx = copy_ctx(conv_state[key] or default_ctx())
        frame_ctx[pinfo.number] = copy_ctx(ctx)
    end
    local ai = t:add(f.addressing, tvb(0, 0), ctx.cam)
    ai:set_generated()
    if ctx.frame then t:add(f.context_frame, tvb(0, 0), ctx.frame):set_generated() end
    local ok, names = parse_datagram(tvb, pinfo, t, ctx)
    if ctx.announced and not pinfo.visited then
        ctx.announced = nil
        conv_state[key] = copy_ctx(ctx)
    end
    local chan = tvb(0, 4):uint()
    local info = string.format("chan 0x%08x ", chan)
    if #names == 0 then info = info .. (ok and "KEEPALIVE" or "") else
        info = info .. table.concat(names, ", ") end
    if not ok then info = info .. " [malformed]" end
    pinfo.cols.info = info
    t:append_text(string.format(", channel 0x%08x, %d message%s", chan, #names,
                                #names == 1 and "" or "s"))
    return n
end

function ppspp.dissector(tvb, pinfo, tree)
    return dissect(tvb, pinfo, tree)
end

-- Strict heuristic: a conversation we already know, or a datagram whose first
-- message is a HANDSHAKE with well-formed sorted options ending with the end
-- option and after which every byte parses as known messages.
local function heuristic(tvb, pinfo, tree)
    local n = tvb:len()
    if n < 4 then return false end
    local key = conv_key(pinfo)
    if conv_state[key] == nil then
        if n < 11 or tvb(4, 1):uint() ~= 0 then return false end
        local probe = default_ctx()
        local ok = parse_datagram(tvb, pinfo, nil, probe)
        if not ok or not probe.announced then return false end
    end
    pinfo.conversation = ppspp
    dissect(tvb, pinfo, tree)
    return true
end

ppspp:register_heuristic("udp", heuristic)
DissectorTable.get("udp.port"):add_for_decode_as(ppspp)  -- Analyze > Decode As
register_port()
