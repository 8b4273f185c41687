package shard

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// fuzzMembers turns fuzz input into a member list: ids are the
// comma-separated fields of ids (so empty, duplicate and odd ids occur), and
// flags[i] gives member i's flags (bit 0 sharding, 1 replica, 2 voter;
// sharding when flags is short). The list is cut at 40 members to keep each
// run fast; MaxRingMembers has its own table test.
func fuzzMembers(ids string, flags []byte) []Member {
	fields := strings.Split(ids, ",")
	if len(fields) > 40 {
		fields = fields[:40]
	}
	members := make([]Member, len(fields))
	for i, id := range fields {
		f := byte(1)
		if i < len(flags) {
			f = flags[i]
		}
		members[i] = Member{ID: id, Sharding: f&1 != 0, Replica: f&2 != 0, Voter: f&4 != 0}
	}
	return members
}

func FuzzRing(f *testing.F) {
	f.Add(uint16(271), "node-1,node-2,node-11", []byte{1, 1, 1})
	f.Add(uint16(3), "a,b,c,d", []byte{1, 3, 5, 7})
	f.Add(uint16(1), "only", []byte{})
	f.Add(uint16(0), "a", []byte{1})
	f.Add(uint16(2), "a,b,c", []byte{})
	f.Add(uint16(271), "a,,b", []byte{})
	f.Add(uint16(271), "a,b,a", []byte{1, 0, 1})
	f.Add(uint16(4096), "x\x00y,z", []byte{})
	f.Add(uint16(271), "r1,r2", []byte{2, 4})
	f.Add(uint16(40), "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40", []byte{})
	f.Fuzz(func(t *testing.T, rawPartitions uint16, ids string, flags []byte) {
		partitions := int(rawPartitions % 4097) // 0..4096: 0 exercises the error
		members := fuzzMembers(ids, flags)

		r, err := NewRing(members, partitions)
		if errors.Is(err, errLibraryPanic) {
			t.Fatalf("validation let the library panic: %v", err)
		}
		reversed := slices.Clone(members)
		slices.Reverse(reversed)
		r2, err2 := NewRing(reversed, partitions)

		if err != nil {
			for _, want := range []error{ErrPartitionCount, ErrNoShardingMember, ErrTooManyMembers, ErrInvalidMemberID, ErrDuplicateMemberID} {
				if errors.Is(err, want) {
					if !errors.Is(err2, want) {
						t.Fatalf("members give %v, reversed give %v", err, err2)
					}
					return
				}
			}
			t.Fatalf("unexpected error: %v", err)
		}
		if err2 != nil {
			t.Fatalf("members give a ring, reversed give %v", err2)
		}

		var shard []string
		for _, m := range members {
			if m.Sharding {
				shard = append(shard, m.ID)
			}
		}
		checkRing(t, r, shard, partitions)
		if !slices.Equal(r.Owners(), r2.Owners()) || !slices.Equal(r.Members(), r2.Members()) {
			t.Fatalf("reversed members give a different ring")
		}
	})
}
