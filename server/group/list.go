package group

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupOperations is the AuthorizedOperations bit field of a group with
// no access control: READ (3), DELETE (6) and DESCRIBE (8).
const groupOperations = 1<<3 | 1<<6 | 1<<8

func (c *Coordinator) handleListGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if resp.ErrorCode = c.enter(req); resp.ErrorCode != errNone {
		return resp
	}
	defer c.unlock()
	var states []string
	if req.Version >= 4 {
		states = req.StatesFilter
	}
	wantType := func(string) bool { return true }
	if req.Version >= 5 && len(req.TypesFilter) > 0 {
		wantType = func(t string) bool {
			return slices.ContainsFunc(req.TypesFilter, func(s string) bool { return strings.EqualFold(strings.TrimSpace(s), t) })
		}
	}
	ids := make([]string, 0, len(c.groups))
	for id := range c.groups {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		g := c.groups[id]
		st, typ, pt := g.state.String(), "classic", g.protocolType
		if g.consumer != nil {
			st, typ, pt = g.consumer.state(), "consumer", "consumer"
		}
		if !wantType(typ) || len(states) > 0 && !slices.ContainsFunc(states, func(s string) bool { return strings.EqualFold(strings.TrimSpace(s), st) }) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group = id
		lg.ProtocolType = pt
		lg.GroupState = st
		lg.GroupType = typ
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

func (c *Coordinator) handleDescribeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	top := c.enter(req)
	if top == errNone {
		defer c.unlock()
	}
	for _, id := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = id
		dg.ErrorCode = top
		if top != errNone {
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		if req.Version >= 3 && req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = groupOperations
		}
		g := c.groups[id]
		if g == nil || g.consumer != nil {
			dg.State = stateDead.String()
			if req.Version >= 6 {
				dg.ErrorCode = errGroupIDNotFound
				msg := fmt.Sprintf("Group %s not found.", id)
				if g != nil {
					msg = fmt.Sprintf("Group %s is not a classic group.", id)
				}
				dg.ErrorMessage = &msg
			}
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		dg.State = g.state.String()
		dg.ProtocolType = g.protocolType
		stable := g.state == stateStable
		if stable {
			dg.Protocol = g.protocol
		}
		for _, m := range g.members {
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID = m.id
			dm.InstanceID = m.instanceID
			dm.ClientID = m.clientID
			dm.ClientHost = m.clientHost
			// Metadata and assignment only describe a stable group.
			if stable {
				dm.ProtocolMetadata = m.metadataFor(g.protocol)
				dm.MemberAssignment = m.assignment
			}
			dg.Members = append(dg.Members, dm)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}
