-- Wireshark dissector for M2C's LCT header extensions (docs/wire-m2c.md):
-- EXT_M2C (HET 120: group, time slot index, per-group PSN and the sequencer
-- header: buffer id, byte offset) and EXT_M2C_CRC (HET 121: CRC-32 of the
-- datagram with the CRC field zeroed).
--
-- Wireshark's built-in ALC/LCT/FEC dissectors (alc, rmt-lct, rmt-fec) show the
-- LCT header, the FEC Payload ID and the symbol; for extensions they do not know
-- they only give rmt-lct.hec.type / .len / .data.  This file adds what those
-- bytes mean, below the built-in tree, in two ways (tshark 4.0):
--
--   1. transport: the "m2c" dissector, reached through the UDP port-range
--      preference, a strict heuristic (LCT v1 + both extensions + a valid CRC;
--      it sets pinfo.conversation) or Decode As, hands the datagram to the
--      built-in "alc" dissector and then adds the M2C subtree;
--   2. postdissector ("m2c_lct"): when ALC was decoded some other way (e.g.
--      `-d udp.port==N,alc`), it finds the ALC datagram through the `alc` field
--      extractor and adds the same M2C subtree.  It does nothing for frames the
--      transport already handled or that carry no HET 120/121.
--
-- Vocabulary: fields are m2c.<scapy field name> of m2c/wire/layers.py (ExtM2C:
-- het, hel, group, slot, psn, buffer_id, offset; ExtM2CCRC: het, hel, reserved,
-- crc; ExtFTI with FEC Encoding ID 3: transfer_length, symbol_size, n1m3, g,
-- max_block_length, max_n, seed); each extension is one m2c.ext subtree (LCT.ext
-- in scapy).  Generated:
-- m2c.crc_computed.  Malformed input gives expert info, never a Lua error.
--
-- The LCT CCI (shown raw by the built-in rmt-lct.cci) is the "M2C CCI
-- (WEBRC-like)" of docs/wire-m2c.md: RFC 3738 5.1's short-format layout holding
-- EXT_M2C's slot mod 256 | group | PSN mod 2^16, not RFC 3738's CTSI/CN/PSN
-- meanings; m2c.cci (cci_slot, cci_group, cci_psn) shows that reading and
-- m2c.cci_mismatch flags a CCI that disagrees with EXT_M2C.
--
-- Usage: tshark -X lua_script:dissectors/m2c.lua -r capture.pcap

local m2c = Proto("m2c", "M2C LCT extensions (EXT_M2C, EXT_M2C_CRC)")

local HET_EXT_M2C, HET_EXT_M2C_CRC, HET_EXT_FTI = 120, 121, 64
local HET_NAMES = { [0] = "EXT_NOP", [1] = "EXT_AUTH", [2] = "EXT_TIME", [64] = "EXT_FTI",
                    [120] = "EXT_M2C", [121] = "EXT_M2C_CRC" }

-- all fields in one table
local f = {
    ext = ProtoField.none("m2c.ext", "Header extension"),
    het = ProtoField.uint8("m2c.het", "Header Extension Type (HET)", base.DEC, HET_NAMES),
    hel = ProtoField.uint8("m2c.hel", "Header Extension Length (HEL, 32-bit words)", base.DEC),
    group = ProtoField.uint16("m2c.group", "Group (channel) index", base.DEC),
    slot = ProtoField.uint32("m2c.slot", "Time slot index", base.DEC),
    psn = ProtoField.uint32("m2c.psn", "Per-group packet sequence number", base.DEC),
    buffer_id = ProtoField.uint32("m2c.buffer_id", "Sequencer: buffer identifier", base.DEC),
    offset = ProtoField.uint32("m2c.offset", "Sequencer: byte offset", base.DEC),
    reserved = ProtoField.uint16("m2c.reserved", "Reserved", base.HEX),
    crc = ProtoField.uint32("m2c.crc", "CRC-32", base.HEX),
    crc_computed = ProtoField.uint32("m2c.crc_computed", "Computed CRC-32", base.HEX),
    -- EXT_FTI (HET 64) with FEC Encoding ID 3's OTI (RFC 5775 4.2, RFC 5170 Figure 2):
    -- Wireshark 4.0 reads it with the generic RFC 5052 layout, so we add the
    -- LDPC-Staircase reading (scapy's ExtFTI)
    transfer_length = ProtoField.uint64("m2c.transfer_length", "Transfer length (L, bytes)"),
    symbol_size = ProtoField.uint16("m2c.symbol_size", "Encoding symbol length (E, bytes)"),
    n1m3 = ProtoField.uint8("m2c.n1m3", "N1 minus 3", base.DEC, nil, 0xE0),
    g = ProtoField.uint8("m2c.g", "G (symbols per packet)", base.DEC, nil, 0x1F),
    max_block_length = ProtoField.uint24("m2c.max_block_length",
                                         "Maximum source block length (B)", base.DEC, nil,
                                         0xFFFFF0),
    max_n = ProtoField.uint24("m2c.max_n", "Maximum number of encoding symbols", base.DEC,
                              nil, 0x0FFFFF),
    seed = ProtoField.uint32("m2c.seed", "PRNG seed", base.DEC),
    -- the LCT CCI (C = 0) read as the M2C CCI (WEBRC-like, ours; docs/wire-m2c.md):
    -- RFC 3738 5.1's layout, EXT_M2C's meanings
    cci = ProtoField.uint32("m2c.cci", "M2C CCI (WEBRC-like, not RFC 3738 5.1's meanings)",
                            base.HEX),
    cci_slot = ProtoField.uint8("m2c.cci_slot", "Time slot index mod 256", base.DEC),
    cci_group = ProtoField.uint8("m2c.cci_group", "Group (channel) index", base.DEC),
    cci_psn = ProtoField.uint16("m2c.cci_psn", "Per-group PSN mod 2^16", base.DEC),
}
m2c.fields = f

local e = {
    bad_length = ProtoExpert.new("m2c.bad_length", "M2C extension with a wrong HEL",
                                 expert.group.MALFORMED, expert.severity.ERROR),
    truncated = ProtoExpert.new("m2c.truncated", "LCT header truncated",
                                expert.group.MALFORMED, expert.severity.ERROR),
    missing = ProtoExpert.new("m2c.missing", "EXT_M2C or EXT_M2C_CRC missing",
                              expert.group.MALFORMED, expert.severity.ERROR),
    bad_crc = ProtoExpert.new("m2c.bad_crc", "EXT_M2C_CRC does not match the datagram",
                              expert.group.CHECKSUM, expert.severity.ERROR),
    cci = ProtoExpert.new("m2c.cci_mismatch", "CCI disagrees with EXT_M2C",
                          expert.group.PROTOCOL, expert.severity.ERROR),
    not_last = ProtoExpert.new("m2c.crc_not_last", "EXT_M2C_CRC is not the last extension",
                               expert.group.PROTOCOL, expert.severity.WARN),
}
m2c.experts = e

m2c.prefs.udp_ports = Pref.range("UDP ports", "47000-47015",
    "UDP ports decoded as M2C over ALC (m2c.aio.driver.make_session: port + channel)",
    65535)

local alc = Dissector.get("alc")

-- ---------------------------------------------------------------------------
-- CRC-32 (IEEE 802.3 / zlib), as EXT_M2C_CRC uses

local CRC_TABLE = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if bit32.band(c, 1) == 1 then c = bit32.bxor(0xEDB88320, bit32.rshift(c, 1))
        else c = bit32.rshift(c, 1) end
    end
    CRC_TABLE[i] = c
end

-- CRC of the tvb's bytes with the 4 bytes at ``zero_at`` taken as zero
local function crc32(tvb, zero_at)
    local ba = tvb:bytes()
    local c = 0xFFFFFFFF
    for i = 0, ba:len() - 1 do
        local b = ba:get_index(i)
        if i >= zero_at and i < zero_at + 4 then b = 0 end
        c = bit32.bxor(CRC_TABLE[bit32.band(bit32.bxor(c, b), 0xFF)], bit32.rshift(c, 8))
    end
    return bit32.bxor(c, 0xFFFFFFFF)
end

-- ---------------------------------------------------------------------------
-- LCT header walk (RFC 5651 5.1, 5.2): where are our extensions?

-- Returns a table {cci_off, c, hdr_len, exts = {{off, het, hel}...}} or nil, why.
local function walk(tvb)
    local n = tvb:len()
    if n < 4 then return nil, "short" end
    local w0 = tvb(0, 4):uint()
    if bit32.rshift(w0, 28) ~= 1 then return nil, "version" end
    local c = bit32.band(bit32.rshift(w0, 26), 3)
    local s = bit32.band(bit32.rshift(w0, 23), 1)
    local o = bit32.band(bit32.rshift(w0, 21), 3)
    local h = bit32.band(bit32.rshift(w0, 20), 1)
    local hdr_len = bit32.band(bit32.rshift(w0, 8), 0xFF) * 4
    local pos = 4 + 4 * (c + 1) + (4 * s + 2 * h) + (4 * o + 2 * h)
    local info = { c = c, cp = bit32.band(w0, 0xFF), hdr_len = hdr_len, exts = {},
                   truncated = false }
    if hdr_len > n then
        info.truncated = true
        hdr_len = n
    end
    if pos > hdr_len then return nil, "header" end
    while pos < hdr_len do
        local het = tvb(pos, 1):uint()
        local len
        if het < 128 then
            if pos + 2 > hdr_len then info.truncated = true; break end
            local hel = tvb(pos + 1, 1):uint()
            len = hel * 4
            if len == 0 then info.bad = true; break end
            info.exts[#info.exts + 1] = { off = pos, het = het, hel = hel, len = len }
        else
            len = 4
        end
        if pos + len > hdr_len then info.truncated = true; break end
        pos = pos + len
    end
    return info
end

local function find(info, het)
    for i, x in ipairs(info.exts) do
        if x.het == het then return x, i end
    end
    return nil
end

-- ---------------------------------------------------------------------------
-- the M2C subtree for an ALC datagram in ``tvb``; false when it is not ours

local function dissect_ext(tvb, pinfo, tree)
    local info = walk(tvb)
    if info == nil then return false end
    local em, crc_x = find(info, HET_EXT_M2C), find(info, HET_EXT_M2C_CRC)
    if em == nil and crc_x == nil then return false end
    local n = tvb:len()
    local t = tree:add(m2c, tvb(0, math.min(n, info.hdr_len)))
    local summary = {}
    local vals = {}
    if info.c == 0 and n >= 8 then
        local ct = t:add(f.cci, tvb(4, 4))
        ct:add(f.cci_slot, tvb(4, 1))
        ct:add(f.cci_group, tvb(5, 1))
        ct:add(f.cci_psn, tvb(6, 2))
    end
    for i, x in ipairs(info.exts) do
        if x.het == HET_EXT_FTI and x.hel == 5 and info.cp == 3 and x.off + 20 <= n then
            local st = t:add(f.ext, tvb(x.off, 20))
            st:set_text("EXT_FTI (HET 64), FEC Encoding ID 3 (RFC 5170 OTI)")
            st:add(f.het, tvb(x.off, 1))
            st:add(f.hel, tvb(x.off + 1, 1))
            st:add(f.transfer_length, tvb(x.off + 2, 6))
            st:add(f.symbol_size, tvb(x.off + 8, 2))
            st:add(f.n1m3, tvb(x.off + 10, 1))
            st:add(f.g, tvb(x.off + 10, 1))
            st:add(f.max_block_length, tvb(x.off + 11, 3))
            st:add(f.max_n, tvb(x.off + 13, 3))
            st:add(f.seed, tvb(x.off + 16, 4))
            st:append_text(": L " .. tostring(tvb(x.off + 2, 6):uint64()) .. ", E "
                           .. tvb(x.off + 8, 2):uint())
        end
        if x.het == HET_EXT_M2C or x.het == HET_EXT_M2C_CRC then
            local avail = math.min(x.len, n - x.off)
            local st = t:add(f.ext, tvb(x.off, avail))
            st:set_text(HET_NAMES[x.het] .. " (HET " .. x.het .. ")")
            st:add(f.het, tvb(x.off, 1))
            local hi = st:add(f.hel, tvb(x.off + 1, 1))
            local want = x.het == HET_EXT_M2C and 5 or 2
            if x.hel ~= want then
                hi:add_proto_expert_info(e.bad_length, HET_NAMES[x.het] .. " has HEL " .. want
                                         .. ", not " .. x.hel)
            elseif avail < x.len then
                st:add_proto_expert_info(e.truncated, "Extension truncated")
            elseif x.het == HET_EXT_M2C then
                local p = x.off + 2
                st:add(f.group, tvb(p, 2))
                st:add(f.slot, tvb(p + 2, 4))
                st:add(f.psn, tvb(p + 6, 4))
                st:add(f.buffer_id, tvb(p + 10, 4))
                st:add(f.offset, tvb(p + 14, 4))
                vals.group, vals.slot, vals.psn = tvb(p, 2):uint(), tvb(p + 2, 4):uint(),
                                                  tvb(p + 6, 4):uint()
                st:append_text(": group " .. vals.group .. ", slot " .. vals.slot .. ", psn "
                               .. vals.psn .. ", buffer " .. tvb(p + 10, 4):uint()
                               .. " offset " .. tvb(p + 14, 4):uint())
                summary[#summary + 1] = "g=" .. vals.group .. " slot=" .. vals.slot
                                        .. " psn=" .. vals.psn
            else
                st:add(f.reserved, tvb(x.off + 2, 2))
                local ci = st:add(f.crc, tvb(x.off + 4, 4))
                local want_crc = crc32(tvb, x.off + 4)
                local got = tvb(x.off + 4, 4):uint()
                st:add(f.crc_computed, tvb(x.off + 4, 4), want_crc):set_generated()
                if got ~= want_crc then
                    ci:add_proto_expert_info(e.bad_crc, string.format(
                        "CRC-32 0x%08x, the datagram gives 0x%08x", got, want_crc))
                    summary[#summary + 1] = "[bad CRC]"
                    st:append_text(string.format(": 0x%08x [incorrect]", got))
                else
                    st:append_text(string.format(": 0x%08x [correct]", got))
                end
                if i ~= #info.exts then
                    st:add_proto_expert_info(e.not_last, "Extensions follow EXT_M2C_CRC")
                end
            end
        end
    end
    if em == nil or crc_x == nil then
        t:add_proto_expert_info(e.missing, (em == nil and "EXT_M2C" or "EXT_M2C_CRC")
                                .. " missing: not a valid M2C packet")
    end
    if info.truncated then
        t:add_proto_expert_info(e.truncated, "LCT header (HDR_LEN " .. info.hdr_len
                                .. " bytes) longer than the datagram or its extensions")
    end
    if info.c == 0 and vals.slot ~= nil and n >= 8 then
        local cci = tvb(4, 4):uint()
        local want = bit32.bor(bit32.lshift(bit32.band(vals.slot, 0xFF), 24),
                               bit32.lshift(bit32.band(vals.group, 0xFF), 16),
                               bit32.band(vals.psn, 0xFFFF))
        if cci ~= want then
            t:add_proto_expert_info(e.cci, string.format(
                "CCI 0x%08x, EXT_M2C gives 0x%08x (M2C CCI, WEBRC-like: slot mod 256, group, PSN mod 2^16)",
                cci, want))
        end
    end
    if #summary > 0 then
        pinfo.cols.info:append(" M2C " .. table.concat(summary, " "))
    end
    return true
end

-- ---------------------------------------------------------------------------
-- 1. transport: UDP payload -> built-in ALC, then our subtree

local handled = {}   -- frame number -> true when the transport added the subtree

function m2c.init()
    handled = {}
end

function m2c.dissector(tvb, pinfo, tree)
    local n = tvb:len()
    if alc ~= nil then
        -- a malformed datagram makes the built-in dissector throw; it has already
        -- marked the tree (show_exception), so the Lua error is not re-raised
        pcall(function() alc:call(tvb, pinfo, tree) end)
    end
    handled[pinfo.number] = true
    if not dissect_ext(tvb, pinfo, tree) then
        local t = tree:add(m2c, tvb(0, math.min(n, 4)))
        t:add_proto_expert_info(e.missing, "No EXT_M2C / EXT_M2C_CRC: not an M2C packet")
    end
    pinfo.cols.protocol = "M2C/ALC"
    return n
end

-- Strict: LCT version 1, EXT_M2C (HEL 5) and EXT_M2C_CRC (HEL 2) inside the
-- header, and a CRC-32 that matches the datagram.
local function heuristic(tvb, pinfo, tree)
    local info = walk(tvb)
    if info == nil or info.truncated or info.bad then return false end
    local em, cx = find(info, HET_EXT_M2C), find(info, HET_EXT_M2C_CRC)
    if em == nil or cx == nil or em.hel ~= 5 or cx.hel ~= 2 then return false end
    if crc32(tvb, cx.off + 4) ~= tvb(cx.off + 4, 4):uint() then return false end
    pinfo.conversation = m2c
    m2c.dissector(tvb, pinfo, tree)
    return true
end

m2c:register_heuristic("udp", heuristic)
DissectorTable.get("udp.port"):add_for_decode_as(m2c)  -- Analyze > Decode As

local cur_ports = nil
local function register_ports()
    local t = DissectorTable.get("udp.port")
    if cur_ports and cur_ports ~= "" then t:remove(cur_ports, m2c) end
    cur_ports = m2c.prefs.udp_ports
    if cur_ports and cur_ports ~= "" then t:add(cur_ports, m2c) end
end

function m2c.prefs_changed()
    register_ports()
end

register_ports()

-- ---------------------------------------------------------------------------
-- 2. postdissector for ALC decoded without us (Decode As alc, ALC's own config)

local alc_field = Field.new("alc")
local m2c_lct = Proto("m2c_lct", "M2C extensions of ALC decoded elsewhere")

function m2c_lct.dissector(tvb, pinfo, tree)
    if handled[pinfo.number] then return end
    local fis = { alc_field() }
    for _, fi in ipairs(fis) do
        local r = fi.range
        if r ~= nil and r:len() >= 4 then
            dissect_ext(r:tvb(), pinfo, tree)
        end
    end
end

register_postdissector(m2c_lct)
