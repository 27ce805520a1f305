package store

import (
	"encoding/hex"
	"strings"
	"testing"
)

// TestChainHashIsTheChainsOwn pins an entry's hash to the bytes it had when the chain
// was defined: an entry written before a change to how the hash is computed must
// still verify after it, so the hash of the same columns can never change.
func TestChainHashIsTheChainsOwn(t *testing.T) {
	s := func(v string) *string { return &v }
	long := strings.Repeat("détail ", 100) // longer than the hash's buffer on the stack
	for _, c := range []struct {
		name string
		row  auditRow
		want string
	}{
		{"a store hit", auditRow{orgID: "acme", seq: 42, at: 1764374400123, actorKind: ActorKey, actorID: s("k1"),
			actorName: s("ci"), action: AuditTaskCreated, subject: s("acme.com"), subjectHash: []byte{1, 2, 3},
			seal: []byte{4, 5}, taskID: s("0193-task"), credits: 1, requestID: s("req-1"), prevHash: zeroHash}, "b05caa18f27180bc1483ff1242f76577c7f19487eccc766858e26d51641b74f1"},
		{"nulls and empties", auditRow{orgID: "", seq: 1, at: 0, actorKind: ActorSystem, action: AuditPurged,
			subjectHash: noSubject, seal: noSubject, credits: -3, detail: s(`{"through":1}`), prevHash: make([]byte, 32)}, "5695fb970aa16e8b0ee6018779e1f2b024fc474bb5535450ebec02d84adbb01f"},
		{"past the buffer", auditRow{orgID: "o", seq: 7, at: 5, actorKind: ActorCLI, action: AuditPersonErased,
			subjectHash: noSubject, seal: noSubject, batchID: s("b"), objID: s("x"), detail: &long, prevHash: zeroHash}, "0f0f75de8badab03cccfd11306ca420c5a65d2215c7196fa3d55e6bb3a51d3e5"},
	} {
		if got := hex.EncodeToString(c.row.chainHash()); got != c.want {
			t.Errorf("%s: hash %s, want %s", c.name, got, c.want)
		}
	}
}
