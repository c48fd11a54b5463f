package gateway_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kgate/kgate/fsm"
)

// A cluster held below a feature level, as while a voter still runs an
// older kgate, answers a request that needs a command of a higher level
// with UNSUPPORTED_VERSION and changes nothing; everything else goes on.
// Group members still leave: below LevelGuardedRemoval the coordinator
// writes RemoveMembers in the version every voter reads.
func TestClusterBelowFeatureLevelRefusesGatedRequests(t *testing.T) {
	held := fsm.LevelClientQuotas - 1
	n := startNodeAt(t, nil, true, &held)
	c := dialRaw(t, n.addr)

	set := kmsg.AlterClientQuotasRequestEntryOp{Key: "producer_byte_rate", Value: 1024}
	resp := c.do(alterQuotaReq(false, quotaEntry(kmsg.StringPtr("app"), set))).(*kmsg.AlterClientQuotasResponse)
	if len(resp.Entries) != 1 || resp.Entries[0].ErrorCode != kerr.UnsupportedVersion.Code || resp.Entries[0].ErrorMessage == nil {
		t.Fatalf("AlterClientQuotas at level %d: %+v, want UNSUPPORTED_VERSION with a message", held, resp.Entries)
	}
	if d := describeQuotas(t, c, false); d.ErrorCode != 0 || len(d.Entries) != 0 {
		t.Fatalf("quotas after a refused alteration: error %d entries %+v", d.ErrorCode, d.Entries)
	}
	scram := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations = "alice", 2, 4096 // SCRAM-SHA-512
	up.Salt, up.SaltedPassword = []byte("salt"), make([]byte, 64)
	scram.Upsertions = append(scram.Upsertions, up)
	sr := c.do(scram).(*kmsg.AlterUserSCRAMCredentialsResponse)
	if len(sr.Results) != 1 || sr.Results[0].ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("AlterUserScramCredentials at level %d: %+v, want UNSUPPORTED_VERSION", held, sr.Results)
	}

	group := groupName(t, c, "held")
	member := stableGroup(t, c, group, "", "consumer", consumerMetadata("a"))
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 3
	leave.Group = group
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = member
	leave.Members = append(leave.Members, lm)
	lr := c.do(leave).(*kmsg.LeaveGroupResponse)
	if lr.ErrorCode != 0 || len(lr.Members) != 1 || lr.Members[0].ErrorCode != 0 {
		t.Fatalf("LeaveGroup at level %d: code %d members %+v", held, lr.ErrorCode, lr.Members)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version = 5
	dg.Groups = []string{group}
	if g := c.do(dg).(*kmsg.DescribeGroupsResponse).Groups[0]; g.State != "Empty" || len(g.Members) != 0 {
		t.Fatalf("group after its member left: %s with %d members", g.State, len(g.Members))
	}
	if l := n.fsm.FeatureLevel(); l != held {
		t.Fatalf("cluster at feature level %d, held at %d", l, held)
	}
}

// ApiVersions (v3+) reports the cluster's feature level as the KIP-584
// feature kgate.version, which kafka-features.sh describe lists: supported
// up to what this binary knows, finalized at the level the cluster runs at
// (here held below it, as during a rolling upgrade), and no feature of
// Kafka's own.
func TestAPIVersionsReportsTheFeatureLevel(t *testing.T) {
	held := fsm.LevelAcls
	n := startNodeAt(t, nil, true, &held)
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kgate-test", "1"
	resp := c.do(req).(*kmsg.ApiVersionsResponse)
	want := []kmsg.ApiVersionsResponseSupportedFeature{{Name: "kgate.version", MinVersion: 0, MaxVersion: int16(fsm.LatestLevel)}}
	if len(resp.SupportedFeatures) != 1 || resp.SupportedFeatures[0].Name != want[0].Name ||
		resp.SupportedFeatures[0].MinVersion != 0 || resp.SupportedFeatures[0].MaxVersion != want[0].MaxVersion {
		t.Errorf("supported features %+v, want %+v", resp.SupportedFeatures, want)
	}
	if f := resp.FinalizedFeatures; len(f) != 1 || f[0].Name != "kgate.version" ||
		f[0].MinVersionLevel != int16(held) || f[0].MaxVersionLevel != int16(held) || resp.FinalizedFeaturesEpoch != int64(held) {
		t.Errorf("finalized features %+v (epoch %d), want kgate.version at %d", f, resp.FinalizedFeaturesEpoch, held)
	}
}
