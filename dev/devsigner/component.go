package devsigner

import (
	"context"

	"github.com/opentreasury/treasury/dev/seed"
	"github.com/opentreasury/treasury/internal/assemble"
)

// Component runs a dev signer in process p with the keys the seed wrote to dataDir,
// signing through p's service and woken by p's event follower. Both the dev bundle and
// the cluster launcher run it.
func Component(p *assemble.Process, dataDir string) assemble.Component {
	var stop context.CancelFunc
	done := make(chan struct{})
	return assemble.Component{Name: "dev signer",
		Start: func(context.Context) error {
			keys, err := seed.LoadSignerKeys(dataDir)
			if err != nil {
				return err
			}
			var ctx context.Context
			ctx, stop = context.WithCancel(context.Background())
			s := New(p.Store, p.Service(), keys, p.Log.With("component", "dev-signer"))
			unsubscribe := p.Follower().Subscribe(s)
			go func() {
				defer close(done)
				defer unsubscribe()
				s.Run(ctx)
			}()
			return nil
		},
		Stop: func(context.Context) error {
			stop()
			<-done
			return nil
		},
	}
}
