package fsm

import (
	"math"
	"sort"
	"strings"
)

// Client quotas (Kafka's KIP-13, KIP-55, KIP-546): rates configured per
// user, per client id or per both, with defaults; replicated so every node
// enforces the same limits.

// KindAlterClientQuotas sets and removes client quota values.
const KindAlterClientQuotas Kind = 19

// Quota entity types, as Kafka names them.
const (
	QuotaUser     = "user"
	QuotaClientID = "client-id"
)

// QuotaKeys are the quota names kgate accepts, as Kafka spells them.
var QuotaKeys = map[string]bool{
	"producer_byte_rate":       true,
	"consumer_byte_rate":       true,
	"request_percentage":       true,
	"controller_mutation_rate": true,
}

// QuotaEntityPart is one component of a quota entity: a named user or
// client id, or (Default) the default for that type.
type QuotaEntityPart struct {
	Type    string // QuotaUser or QuotaClientID
	Name    string
	Default bool
}

// QuotaEntity is at most one user part and one client-id part, user first.
type QuotaEntity []QuotaEntityPart

// Key is the entity's canonical form, unique per entity.
func (e QuotaEntity) Key() string {
	var b strings.Builder
	for _, p := range e {
		b.WriteString(p.Type)
		if p.Default {
			b.WriteString("\x00d")
		} else {
			b.WriteString("\x00n")
			b.WriteString(p.Name)
		}
		b.WriteByte(0)
	}
	return b.String()
}

// Valid reports whether e has one or two parts of distinct known types.
func (e QuotaEntity) Valid() bool {
	if len(e) == 0 || len(e) > 2 {
		return false
	}
	for _, p := range e {
		if p.Type != QuotaUser && p.Type != QuotaClientID || (p.Default && p.Name != "") {
			return false
		}
	}
	return len(e) == 1 || e[0].Type == QuotaUser && e[1].Type == QuotaClientID
}

// QuotaOp sets (or, with Remove, deletes) one quota value.
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// QuotaAlteration is the changes to one entity.
type QuotaAlteration struct {
	Entity QuotaEntity
	Ops    []QuotaOp
}

// AlterClientQuotas applies alterations, each all or nothing. The leader
// has validated them; Apply checks again and answers per alteration.
type AlterClientQuotas struct{ Alterations []QuotaAlteration }

func (*AlterClientQuotas) Kind() Kind { return KindAlterClientQuotas }
func (c *AlterClientQuotas) encode(e *enc) {
	e.uvar(uint64(len(c.Alterations)))
	for _, a := range c.Alterations {
		encodeQuotaEntity(e, a.Entity)
		e.uvar(uint64(len(a.Ops)))
		for _, op := range a.Ops {
			e.str(op.Key)
			e.u64(math.Float64bits(op.Value))
			e.bool(op.Remove)
		}
	}
}

func encodeQuotaEntity(e *enc, ent QuotaEntity) {
	e.uvar(uint64(len(ent)))
	for _, p := range ent {
		e.str(p.Type)
		e.str(p.Name)
		e.bool(p.Default)
	}
}

func decodeQuotaEntity(d *dec) QuotaEntity {
	n := d.count(3)
	ent := make(QuotaEntity, 0, n)
	for i := 0; i < n; i++ {
		ent = append(ent, QuotaEntityPart{Type: d.str(), Name: d.str(), Default: d.bool()})
	}
	return ent
}

func decodeAlterClientQuotas(d *dec) *AlterClientQuotas {
	c := &AlterClientQuotas{}
	n := d.count(2)
	for i := 0; i < n && d.err == nil; i++ {
		a := QuotaAlteration{Entity: decodeQuotaEntity(d)}
		no := d.count(10)
		for j := 0; j < no && d.err == nil; j++ {
			a.Ops = append(a.Ops, QuotaOp{Key: d.str(), Value: math.Float64frombits(d.u64()), Remove: d.bool()})
		}
		c.Alterations = append(c.Alterations, a)
	}
	return c
}

// QuotaResults answers AlterClientQuotas: one code per alteration.
type QuotaResults struct{ Codes []int16 }

// clientQuota is one entity's values.
type clientQuota struct {
	entity QuotaEntity
	values map[string]float64
}

// validQuotaValue applies Kafka's rule: a positive finite number.
func validQuotaValue(v float64) bool { return v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

func (f *FSM) applyAlterClientQuotas(c *AlterClientQuotas) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &QuotaResults{Codes: make([]int16, len(c.Alterations))}
	for i, a := range c.Alterations {
		if !a.Entity.Valid() {
			out.Codes[i] = ErrInvalidRequest
			continue
		}
		ok := true
		for _, op := range a.Ops {
			ok = ok && QuotaKeys[op.Key] && (op.Remove || validQuotaValue(op.Value))
		}
		if !ok {
			out.Codes[i] = ErrInvalidRequest
			continue
		}
		key := a.Entity.Key()
		q := f.quotas[key]
		if q == nil {
			q = &clientQuota{entity: append(QuotaEntity(nil), a.Entity...), values: map[string]float64{}}
		}
		for _, op := range a.Ops {
			if op.Remove {
				delete(q.values, op.Key)
			} else {
				q.values[op.Key] = op.Value
			}
		}
		if len(q.values) == 0 {
			delete(f.quotas, key)
		} else {
			f.quotas[key] = q
		}
	}
	return out
}

// ClientQuota is one entity's configured values, for readers.
type ClientQuota struct {
	Entity QuotaEntity
	Values map[string]float64
}

// ClientQuotas lists every entity with quotas, in canonical key order.
func (f *FSM) ClientQuotas() []ClientQuota {
	f.mu.RLock()
	defer f.mu.RUnlock()
	keys := make([]string, 0, len(f.quotas))
	for k := range f.quotas {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ClientQuota, 0, len(keys))
	for _, k := range keys {
		q := f.quotas[k]
		vals := make(map[string]float64, len(q.values))
		for n, v := range q.values {
			vals[n] = v
		}
		out = append(out, ClientQuota{Entity: append(QuotaEntity(nil), q.entity...), Values: vals})
	}
	return out
}

// QuotaFor finds the quota named key that applies to a connection of user
// and clientID, in Kafka's order of precedence (most specific first):
// user+client, user+default client, user, default user+client, default
// user+default client, default user, client, default client. It returns
// the value and the names the rate is measured per: the user and/or client
// id as far as the matching entity names them (a default entity applies to
// each user or client id separately, as in Kafka).
func (f *FSM) QuotaFor(user, clientID, key string) (value float64, perUser, perClient string, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if len(f.quotas) == 0 {
		return 0, "", "", false
	}
	u := func(def bool) QuotaEntityPart {
		return QuotaEntityPart{Type: QuotaUser, Name: pick(def, user), Default: def}
	}
	c := func(def bool) QuotaEntityPart {
		return QuotaEntityPart{Type: QuotaClientID, Name: pick(def, clientID), Default: def}
	}
	order := []QuotaEntity{
		{u(false), c(false)}, {u(false), c(true)}, {u(false)},
		{u(true), c(false)}, {u(true), c(true)}, {u(true)},
		{c(false)}, {c(true)},
	}
	for _, ent := range order {
		q := f.quotas[ent.Key()]
		if q == nil {
			continue
		}
		v, has := q.values[key]
		if !has {
			continue
		}
		for _, p := range ent {
			if p.Type == QuotaUser {
				perUser = user
			} else {
				perClient = clientID
			}
		}
		return v, perUser, perClient, true
	}
	return 0, "", "", false
}

func pick(def bool, name string) string {
	if def {
		return ""
	}
	return name
}

// encodeQuotasLocked writes every entity's quotas in key order (the last
// section of the snapshot metadata).
func (f *FSM) encodeQuotasLocked(e *enc) {
	keys := make([]string, 0, len(f.quotas))
	for k := range f.quotas {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.uvar(uint64(len(keys)))
	for _, k := range keys {
		q := f.quotas[k]
		encodeQuotaEntity(e, q.entity)
		names := make([]string, 0, len(q.values))
		for n := range q.values {
			names = append(names, n)
		}
		sort.Strings(names)
		e.uvar(uint64(len(names)))
		for _, n := range names {
			e.str(n)
			e.u64(math.Float64bits(q.values[n]))
		}
	}
}

// decodeQuotas reads the quota section; metadata written before quotas
// existed ends without one.
func decodeQuotas(d *dec) map[string]*clientQuota {
	out := map[string]*clientQuota{}
	if len(d.b) == 0 || d.err != nil {
		return out
	}
	n := d.count(4)
	for i := 0; i < n && d.err == nil; i++ {
		q := &clientQuota{entity: decodeQuotaEntity(d), values: map[string]float64{}}
		nv := d.count(9)
		for j := 0; j < nv && d.err == nil; j++ {
			q.values[d.str()] = math.Float64frombits(d.u64())
		}
		out[q.entity.Key()] = q
	}
	return out
}
