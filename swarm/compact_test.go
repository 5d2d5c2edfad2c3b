package swarm

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"unsafe"

	"github.com/docker/docker/api/types/swarm"
)

// compactFixture is four services as the Engine lists them: web and api
// alike in most of what they hold, worker and batch each differing from
// them in one nested field (a health check interval, a nil list against
// an empty one, a label deep in a network attachment, a timestamp).
const compactFixture = `[
{"ID":"w1","Version":{"Index":10},"CreatedAt":"2026-12-01T10:00:00.5Z",
 "Spec":{"Name":"shop_web","Labels":{"com.docker.stack.namespace":"shop","io.skep.application":"shop"},
  "TaskTemplate":{"ContainerSpec":{"Image":"nginx:1.27","Labels":{"com.docker.stack.namespace":"shop"},"Env":["A=1","B=2"],
    "Healthcheck":{"Test":["CMD","true"],"Interval":2000000000},"Privileges":{"NoNewPrivileges":false},"DNSConfig":{}},
   "RestartPolicy":{"Condition":"any","Delay":5000000000},"Networks":[{"Target":"n1","Aliases":["web"],"DriverOpts":{"x":"1"}}]},
  "Mode":{"Replicated":{"Replicas":2}},"UpdateConfig":{"Parallelism":1,"FailureAction":"pause","Order":"stop-first"}},
 "PreviousSpec":{"Name":"shop_web","Labels":{"com.docker.stack.namespace":"shop"}},
 "ServiceStatus":{"RunningTasks":2,"DesiredTasks":2}},
{"ID":"a1","Version":{"Index":11},"CreatedAt":"2026-12-01T10:00:00.5Z",
 "Spec":{"Name":"shop_api","Labels":{"io.skep.application":"shop","com.docker.stack.namespace":"shop"},
  "TaskTemplate":{"ContainerSpec":{"Image":"nginx:1.27","Labels":{"com.docker.stack.namespace":"shop"},"Env":["A=1","B=2"],
    "Healthcheck":{"Test":["CMD","true"],"Interval":2000000000},"Privileges":{"NoNewPrivileges":false},"DNSConfig":{}},
   "RestartPolicy":{"Condition":"any","Delay":5000000000},"Networks":[{"Target":"n1","Aliases":["web"],"DriverOpts":{"x":"1"}}]},
  "Mode":{"Replicated":{"Replicas":2}},"UpdateConfig":{"Parallelism":1,"FailureAction":"pause","Order":"stop-first"}},
 "ServiceStatus":{"RunningTasks":2,"DesiredTasks":2}},
{"ID":"k1","Version":{"Index":12},"CreatedAt":"2026-12-01T10:00:00.6Z",
 "Spec":{"Name":"shop_worker","Labels":{"com.docker.stack.namespace":"shop","io.skep.application":"shop"},
  "TaskTemplate":{"ContainerSpec":{"Image":"nginx:1.27","Labels":{"com.docker.stack.namespace":"shop"},"Env":[],
    "Healthcheck":{"Test":["CMD","true"],"Interval":3000000000},"Privileges":{"NoNewPrivileges":true},"DNSConfig":{}},
   "RestartPolicy":{"Condition":"any","Delay":5000000000},"Networks":[{"Target":"n1","Aliases":["web"],"DriverOpts":{"x":"2"}}]},
  "Mode":{"Replicated":{"Replicas":3}},"UpdateConfig":{"Parallelism":1,"FailureAction":"pause","Order":"stop-first"}}},
{"ID":"b1","Version":{"Index":13},"CreatedAt":"2026-12-01T10:00:00.5Z",
 "Spec":{"Name":"shop_batch","Labels":{"com.docker.stack.namespace":"shop"},
  "TaskTemplate":{"ContainerSpec":{"Image":"nginx:1.27","Labels":{"com.docker.stack.namespace":"shop"},
    "Healthcheck":{"Test":["CMD","true"],"Interval":2000000000},"DNSConfig":{}},
   "RestartPolicy":{"Condition":"on-failure","Delay":5000000000}},
  "Mode":{"ReplicatedJob":{}},"UpdateConfig":{"Parallelism":1,"FailureAction":"pause","Order":"stop-first"}}}
]`

func decodeFixture(t *testing.T) []swarm.Service {
	t.Helper()
	var out []swarm.Service
	if err := json.Unmarshal([]byte(compactFixture), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCompactedServicesKeepTheirContent: sharing never merges two values
// that differ, however deep the difference lies.
func TestCompactedServicesKeepTheirContent(t *testing.T) {
	got, want := decodeFixture(t), decodeFixture(t)
	got = compactServices(got)
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want[i])
			t.Errorf("service %s changed by compaction:\n got %s\nwant %s", want[i].Spec.Name, g, w)
		}
	}
}

// TestCompactedServicesShareWhatIsAlike: what two services hold alike is
// held once.
func TestCompactedServicesShareWhatIsAlike(t *testing.T) {
	s := compactServices(decodeFixture(t))
	web, api, worker, batch := s[0], s[1], s[2], s[3]
	mapOf := func(m map[string]string) uintptr { return reflect.ValueOf(m).Pointer() }
	if web.Spec.TaskTemplate.ContainerSpec != api.Spec.TaskTemplate.ContainerSpec {
		t.Error("equal container specs are not one")
	}
	if mapOf(web.Spec.Labels) != mapOf(api.Spec.Labels) {
		t.Error("equal label maps (listed in another order) are not one")
	}
	if mapOf(web.PreviousSpec.Labels) != mapOf(batch.Spec.Labels) {
		t.Error("equal label maps of a previous spec and another service's spec are not one")
	}
	if web.Spec.UpdateConfig != batch.Spec.UpdateConfig {
		t.Error("equal update configs are not one")
	}
	if unsafe.StringData(web.Spec.TaskTemplate.ContainerSpec.Image) != unsafe.StringData(batch.Spec.TaskTemplate.ContainerSpec.Image) {
		t.Error("equal images are not one string")
	}
	if worker.Spec.TaskTemplate.ContainerSpec == web.Spec.TaskTemplate.ContainerSpec ||
		batch.Spec.TaskTemplate.ContainerSpec == web.Spec.TaskTemplate.ContainerSpec ||
		batch.Spec.TaskTemplate.RestartPolicy == web.Spec.TaskTemplate.RestartPolicy ||
		worker.Spec.Mode.Replicated == web.Spec.Mode.Replicated {
		t.Error("values that differ were made one")
	}
	if web.Spec.Mode.Replicated != api.Spec.Mode.Replicated || web.ServiceStatus != api.ServiceStatus {
		t.Error("equal modes or statuses are not one")
	}
}

// TestCompactedServicesHoldNothingOfTheDecodedList: every string, map,
// slice and pointed-to value of the result is a new copy, so that what
// the decoder allocated is garbage whole once the result is kept.
func TestCompactedServicesHoldNothingOfTheDecodedList(t *testing.T) {
	decoded := decodeFixture(t)
	before := map[uintptr]string{}
	for i := range decoded {
		addresses(reflect.ValueOf(decoded[i]), decoded[i].Spec.Name, func(addr uintptr, path string) { before[addr] = path })
	}
	got := compactServices(decoded)
	if len(got) == 0 || &got[0] == &decoded[0] {
		t.Fatal("the list itself was not copied")
	}
	for i := range got {
		addresses(reflect.ValueOf(got[i]), got[i].Spec.Name, func(addr uintptr, path string) {
			if was, found := before[addr]; found {
				t.Errorf("%s is the decoded list's %s", path, was)
			}
		})
	}
}

// addresses calls found with the address of every string's bytes, map,
// slice's array and pointed-to value that v holds, and the path to it.
func addresses(v reflect.Value, path string, found func(uintptr, string)) {
	switch v.Kind() {
	case reflect.String:
		if v.Len() > 0 {
			found(uintptr(unsafe.Pointer(unsafe.StringData(v.String()))), path)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			found(v.Pointer(), path)
			addresses(v.Elem(), path, found)
		}
	case reflect.Slice:
		if v.Cap() > 0 {
			found(v.Pointer(), path)
		}
		for i := range v.Len() {
			addresses(v.Index(i), path+"["+strconv.Itoa(i)+"]", found)
		}
	case reflect.Map:
		if !v.IsNil() {
			found(v.Pointer(), path)
		}
		for it := v.MapRange(); it.Next(); {
			addresses(it.Key(), path+"["+it.Key().String()+"]", found)
			addresses(it.Value(), path+"["+it.Key().String()+"]", found)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				addresses(v.Field(i), path+"."+v.Type().Field(i).Name, found)
			}
		}
	case reflect.Interface:
		if !v.IsNil() {
			addresses(v.Elem(), path, found)
		}
	}
}

// BenchmarkCompactServices measures a compaction of 1,000 services alike
// but for their names and ids.
func BenchmarkCompactServices(b *testing.B) {
	var one []swarm.Service
	if err := json.Unmarshal([]byte(compactFixture), &one); err != nil {
		b.Fatal(err)
	}
	raw, _ := json.Marshal(one[0])
	list := func() []swarm.Service {
		out := make([]swarm.Service, 1000)
		for i := range out {
			if err := json.Unmarshal(raw, &out[i]); err != nil {
				b.Fatal(err)
			}
			out[i].ID, out[i].Spec.Name = "id"+strconv.Itoa(i), "svc"+strconv.Itoa(i)
		}
		return out
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		s := list()
		b.StartTimer()
		compactServices(s)
	}
}
