package access

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Client writes as the module's identity and reads as admin. Reads change
// nothing in the runtime, and the content's objects are read as the
// connection's admin to find out what exists under their names; every
// write, dry-runs included, is the identity's, so that the runtime's API
// server judges it against the module's grant.
func Client(admin client.Reader, identity client.Client) client.Client {
	return split{Client: identity, admin: admin}
}

type split struct {
	client.Client
	admin client.Reader
}

func (s split) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return s.admin.Get(ctx, key, obj, opts...)
}

func (s split) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return s.admin.List(ctx, list, opts...)
}
