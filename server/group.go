package server

import "github.com/twmb/franz-go/pkg/kmsg"

// findCoordinator answers this node for transactional ids (type 1)
// always, and for groups (type 0) when a group coordinator is
// configured; otherwise COORDINATOR_NOT_AVAILABLE.
func (s *Server) findCoordinator(cc *connCtx, req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.Version = req.Version
	host, port := cc.hostPort()
	code := errNone
	switch req.CoordinatorType {
	case 0:
		if s.cfg.Groups == nil {
			code = errCoordinatorNotAvailable
		}
	case 1:
	default:
		code = errInvalidRequest
	}
	answer := func(key string) kmsg.FindCoordinatorResponseCoordinator {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.ErrorCode = key, code
		c.NodeID, c.Host, c.Port = -1, "", -1
		if code == errNone {
			c.NodeID, c.Host, c.Port = s.cfg.NodeID, host, port
		} else {
			msg := "no group coordinator on this node"
			if code == errInvalidRequest {
				msg = "unknown coordinator type"
			}
			c.ErrorMessage = &msg
		}
		return c
	}
	if req.Version >= 4 {
		for _, k := range req.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, answer(k))
		}
		return resp
	}
	c := answer(req.CoordinatorKey)
	resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
	return resp
}
