package server

import (
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/partlog/partlog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic config changes: IncrementalAlterConfigs (SET, DELETE, APPEND,
// SUBTRACT per config) and the legacy AlterConfigs (the request's configs
// replace the topic's whole set), as Kafka's controller applies them to
// topic resources: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION, an
// unknown config, an invalid value, or APPEND/SUBTRACT on a config that
// is not a list INVALID_CONFIG, a resource named twice INVALID_REQUEST;
// validate-only checks and changes nothing. A change is kept in the
// server's state file and applied to every partition of the topic at
// once (Log.Reconfigure; the server's own view of LogAppendTime, the
// segment size and min.insync.replicas with it). Broker resources are
// refused: this server keeps no broker configs.

// alterOp is one change of a topic config.
type alterOp struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

// errNoBrokerConfigs answers a config request for a broker resource.
var errNoBrokerConfigs = errors.New("partlog serve keeps no broker configs (topic resources only)")

// alterTopicConfigs applies ops to a topic's configs (replace: the
// result is only the SET ops, as the legacy AlterConfigs) and returns
// the error code and message for the resource.
func (s *Server) alterTopicConfigs(name string, ops []alterOp, replace, validateOnly bool) (int16, string) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	t := s.topicByName(name)
	if t == nil {
		return errUnknownTopicOrPartition, "unknown topic " + name
	}
	cur := s.meta.topicConfigs(name)
	next := maps.Clone(cur)
	if replace || next == nil {
		next = map[string]string{}
	}
	for _, o := range ops {
		c, ok := lookupTopicConfig(o.name)
		if !ok {
			return errInvalidConfig, fmt.Sprintf("unknown topic config name: %s (or one partlog serve does not implement)", o.name)
		}
		switch o.op {
		case kmsg.IncrementalAlterConfigOpSet:
			if o.value == nil {
				return errInvalidRequest, "null value for config " + o.name
			}
			next[o.name] = *o.value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, o.name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if c.typ != kmsg.ConfigTypeList {
				return errInvalidConfig, fmt.Sprintf("config %s cannot be appended to or subtracted from: it is not a list", o.name)
			}
			if o.value == nil {
				return errInvalidRequest, "null value for config " + o.name
			}
			next[o.name] = listOp(o.op, next[o.name], c.get((&partlog.Options{}).Effective()), *o.value)
		default:
			return errInvalidRequest, fmt.Sprintf("unknown operation %d for config %s", o.op, o.name)
		}
	}
	checked, err := checkConfigs(next)
	if err != nil {
		return errInvalidConfig, err.Error()
	}
	tmpl := partlog.Options{}
	if s.cfg.Log != nil {
		tmpl = *s.cfg.Log
	}
	opts, _ := topicOptions(tmpl, checked)
	if validateOnly {
		return errNone, ""
	}
	if err := s.meta.setTopicConfigs(name, checked); err != nil {
		return errKafkaStorageError, err.Error()
	}
	s.tmu.RLock()
	parts := append([]*partition(nil), t.parts...)
	s.tmu.RUnlock()
	var errs []error
	for _, p := range parts {
		if p == nil {
			continue
		}
		o := opts
		if err := p.log.Reconfigure(&o); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.tp, err))
		}
		p.setConfigs(tmpl, checked)
	}
	if err := errors.Join(errs...); err != nil {
		return partlog.KafkaErrorCode(err), err.Error()
	}
	return errNone, ""
}

// listOp appends value's entries to (or subtracts them from) a list
// config's entries (cur, or the default when unset).
func listOp(op kmsg.IncrementalAlterConfigOp, cur, def, value string) string {
	if cur == "" {
		cur = def
	}
	var out []string
	for _, e := range strings.Split(cur, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	for _, e := range strings.Split(value, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		i := -1
		for j, x := range out {
			if x == e {
				i = j
			}
		}
		switch {
		case op == kmsg.IncrementalAlterConfigOpAppend && i < 0:
			out = append(out, e)
		case op == kmsg.IncrementalAlterConfigOpSubtract && i >= 0:
			out = append(out[:i], out[i+1:]...)
		}
	}
	return strings.Join(out, ",")
}

// duplicateResources reports the resources a config request names more
// than once (Kafka refuses each with INVALID_REQUEST).
func duplicateResources(n int, key func(i int) string) map[string]bool {
	seen, dup := map[string]bool{}, map[string]bool{}
	for i := 0; i < n; i++ {
		k := key(i)
		if seen[k] {
			dup[k] = true
		}
		seen[k] = true
	}
	return dup
}

func (s *Server) incrementalAlterConfigs(req *kmsg.IncrementalAlterConfigsRequest) kmsg.Response {
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	resp.Version = req.Version
	dup := duplicateResources(len(req.Resources), func(i int) string {
		return resourceKey(req.Resources[i].ResourceType, req.Resources[i].ResourceName)
	})
	for _, rr := range req.Resources {
		r := kmsg.NewIncrementalAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		r.ErrorCode, r.ErrorMessage = s.alterResource(rr.ResourceType, rr.ResourceName, dup, func() []alterOp {
			ops := make([]alterOp, len(rr.Configs))
			for i, c := range rr.Configs {
				ops[i] = alterOp{c.Name, c.Op, c.Value}
			}
			return ops
		}, false, req.ValidateOnly)
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}

func (s *Server) alterConfigs(req *kmsg.AlterConfigsRequest) kmsg.Response {
	resp := kmsg.NewPtrAlterConfigsResponse()
	resp.Version = req.Version
	dup := duplicateResources(len(req.Resources), func(i int) string {
		return resourceKey(req.Resources[i].ResourceType, req.Resources[i].ResourceName)
	})
	for _, rr := range req.Resources {
		r := kmsg.NewAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		r.ErrorCode, r.ErrorMessage = s.alterResource(rr.ResourceType, rr.ResourceName, dup, func() []alterOp {
			ops := make([]alterOp, len(rr.Configs))
			for i, c := range rr.Configs {
				ops[i] = alterOp{c.Name, kmsg.IncrementalAlterConfigOpSet, c.Value}
			}
			return ops
		}, true, req.ValidateOnly)
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}

// resourceKey names a config request's resource for duplicateResources.
func resourceKey(typ kmsg.ConfigResourceType, name string) string {
	return fmt.Sprint(typ, "/", name)
}

// alterResource answers one resource of an AlterConfigs (replace: the
// request sets the whole configuration) or IncrementalAlterConfigs
// request: refused when named twice or not a topic, else the ops applied
// to the topic's configuration.
func (s *Server) alterResource(typ kmsg.ConfigResourceType, name string, dup map[string]bool, ops func() []alterOp, replace, validateOnly bool) (int16, *string) {
	var code int16
	var msg string
	switch {
	case dup[resourceKey(typ, name)]:
		code, msg = errInvalidRequest, "resource named more than once in the request"
	case typ != kmsg.ConfigResourceTypeTopic:
		code, msg = errInvalidRequest, errNoBrokerConfigs.Error()
	default:
		code, msg = s.alterTopicConfigs(name, ops(), replace, validateOnly)
	}
	if code == errNone {
		return code, nil
	}
	return code, &msg
}
